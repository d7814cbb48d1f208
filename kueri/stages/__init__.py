"""stages: a run as an ordered list of stages, each one module with its settings, flags and summary.

``RunConfig.stages()`` compiles a configuration into the list; :class:`kueri.pipeline.Pipeline` applies
it; ``kueri run`` takes the stages' flags and ``kueri.pyterrier`` wraps each stage in one transformer.
Adding a stage: a module with a :class:`Stage` and a :class:`StageKind` whose :class:`Option` s declare its
settings (the configuration's fields, the flags, the PyTerrier parameters and the docs table are made of them),
and one :func:`register` call (below for kueri's own, in run order; see docs/architecture.md).
"""

from kueri.stages import quality, retrieval, second_stage, stance
from kueri.stages.base import (
    ALL,
    OFF,
    STAGES,
    Context,
    Option,
    Stage,
    StageDefaults,
    StageKind,
    Texts,
    add_flags,
    compile_stages,
    depth_flag,
    kind_named,
    options,
    register,
    settings_table,
    stored_encoder,
    unregister,
)

# The order of a run's stages, written once.
for _kind in (retrieval.KIND, second_stage.KIND, quality.KIND, stance.KIND):
    register(_kind)

__all__ = ["ALL", "OFF", "STAGES", "Context", "Option", "Stage", "StageDefaults", "StageKind", "Texts", "add_flags",
           "compile_stages", "depth_flag", "kind_named", "options", "register", "settings_table", "stored_encoder",
           "unregister"]
