"""stages: a run as an ordered list of stages, each one module with its settings, flags and summary.

``RunConfig.stages()`` compiles a configuration into the list; :class:`kueri.pipeline.Pipeline` applies
it; ``kueri run`` takes the stages' flags and ``kueri.pyterrier`` wraps each stage in one transformer.
Adding a stage: a module with a :class:`Stage` and a :class:`StageKind`, and one :func:`register` call
(below for kueri's own; see docs/architecture.md).
"""

from kueri.stages import quality, retrieval, second_stage, stance
from kueri.stages.base import (
    STAGES,
    Context,
    Option,
    Stage,
    StageDefaults,
    StageKind,
    Texts,
    add_flags,
    compile_stages,
    options,
    register,
    stored_encoder,
    unregister,
)

# The order of a run's stages, written once.
for _kind in (retrieval.KIND, second_stage.KIND, quality.KIND, stance.KIND):
    register(_kind)

__all__ = ["STAGES", "Context", "Option", "Stage", "StageDefaults", "StageKind", "Texts", "add_flags",
           "compile_stages", "options", "register", "stored_encoder", "unregister"]
