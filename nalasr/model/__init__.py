"""The NaLaSR network (:mod:`.nalasr`), its typed metadata (:mod:`.spec`) and the softmax baseline mixer
(:mod:`.softmax_mixer`, benchmarks only)."""

from .nalasr import (
    DEFAULT_VARIANT,
    SCALES,
    VARIANTS,
    NaLaSR,
    NaLaSRConfig,
    Trunk,
    Upsampler,
    config_for,
    count_params,
    create_model,
    reconstruct,
    variant_of,
)
from .spec import ModelSpec, spec_of

__all__ = ["DEFAULT_VARIANT", "SCALES", "VARIANTS", "ModelSpec", "NaLaSR", "NaLaSRConfig", "Trunk", "Upsampler",
           "config_for", "count_params", "create_model", "reconstruct", "spec_of", "variant_of"]
