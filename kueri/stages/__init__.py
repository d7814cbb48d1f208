"""stages: a run as an ordered list of stages, each one module with its settings, flags and summary.

``RunConfig.stages()`` compiles a configuration into the list; :class:`kueri.pipeline.Pipeline` applies
it; ``kueri run`` takes the stages' flags and ``kueri.pyterrier`` wraps each stage in one transformer.
Adding a stage: a module with a :class:`Stage` and a :class:`StageKind` whose :class:`Option` s declare its
settings (the configuration's fields, the flags, the PyTerrier parameters and the docs table are made of them),
and one :func:`register` call (below for kueri's own, in run order; see docs/architecture.md).
"""

from kueri.stages import quality, retrieval, second_stage, stance
from kueri.stages.base import (
    STAGES,
    Context,
    Cost,
    Stage,
    StageDefaults,
    StageKind,
    Texts,
    add_flags,
    capability,
    compile_stages,
    flag_owners,
    kind_named,
    options,
    register,
    settings_table,
    stored_encoder,
    unregister,
)
from kueri.stages.plan import Plan
from kueri.stages.settings import ALL, FLAG_GROUPS, OFF, Flag, Option, depth_flag, flag, options_of, setting

# The order of a run's stages, written once.
for _kind in (retrieval.KIND, second_stage.KIND, quality.KIND, stance.KIND):
    register(_kind)

__all__ = ["ALL", "FLAG_GROUPS", "OFF", "STAGES", "Context", "Cost", "Flag", "Option", "Plan", "Stage",
           "StageDefaults", "StageKind", "Texts", "add_flags", "capability", "compile_stages", "depth_flag", "flag",
           "flag_owners", "kind_named", "options", "options_of", "register", "setting", "settings_table",
           "stored_encoder", "unregister"]
