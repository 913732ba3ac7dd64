"""Built-in templates and their hyperparameters: defaults and allowed ranges (no torch import)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class HParam:
    """One hyperparameter a template accepts."""

    default: Any
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] | None = None
    help: str = ""

    @property
    def kind(self) -> type:
        return type(self.default)

    def check(self, name: str, value: Any) -> Any:
        """Return the value coerced to this parameter's type, or raise ValueError."""
        kind = self.kind
        if kind is bool:
            if not isinstance(value, bool):
                raise ValueError(f"{name} must be true or false")
            return value
        if kind is str:
            if not isinstance(value, str) or (self.choices and value not in self.choices):
                raise ValueError(f"{name} must be one of {', '.join(self.choices or ())}")
            return value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"{name} must be a number")
        if kind is int:
            if isinstance(value, float) and not value.is_integer():
                raise ValueError(f"{name} must be a whole number")
            value = int(value)
        else:
            value = float(value)
            if value != value or value in (float("inf"), float("-inf")):
                raise ValueError(f"{name} must be finite")
        if self.minimum is not None and value < self.minimum:
            raise ValueError(f"{name} must be >= {self.minimum:g}")
        if self.maximum is not None and value > self.maximum:
            raise ValueError(f"{name} must be <= {self.maximum:g}")
        return value


_COMMON: dict[str, HParam] = {
    "steps": HParam(200, 1, 10_000_000, help="optimizer steps to train"),
    "batch_size": HParam(32, 1, 65_536, help="samples per data-parallel rank per micro-step"),
    "lr": HParam(0.01, 1e-7, 10.0, help="peak learning rate"),
    "seed": HParam(0, 0, 2**31 - 1, help="seed for data and initialisation"),
    "optimizer": HParam("adamw", choices=("adamw", "sgd"), help="optimizer"),
    "weight_decay": HParam(0.0, 0.0, 1.0, help="decoupled weight decay"),
}

TEMPLATES: dict[str, dict[str, HParam]] = {
    "mlp": {
        **_COMMON,
        "hidden": HParam(64, 4, 65_536, help="width of each hidden layer"),
        "layers": HParam(4, 2, 256, help="number of hidden blocks (pipeline-splittable)"),
        "features": HParam(16, 1, 65_536, help="input features of the synthetic data"),
        "classes": HParam(4, 2, 10_000, help="classes of the synthetic data"),
        "dataset_size": HParam(4096, 64, 100_000_000, help="synthetic samples"),
    },
    "cnn": {
        **_COMMON,
        "channels": HParam(16, 4, 1024, help="channels of each conv block"),
        "blocks": HParam(4, 2, 64, help="conv blocks (pipeline-splittable)"),
        "image_size": HParam(16, 8, 256, help="side of the generated images"),
        "dataset_size": HParam(4096, 64, 10_000_000, help="generated images"),
    },
    "gpt": {
        **_COMMON,
        "lr": HParam(0.003, 1e-7, 10.0, help="peak learning rate"),
        "n_layer": HParam(4, 2, 96, help="transformer blocks (pipeline-splittable)"),
        "n_head": HParam(4, 1, 128, help="attention heads"),
        "n_embd": HParam(128, 16, 16_384, help="embedding width (divisible by n_head)"),
        "block_size": HParam(64, 8, 4096, help="context length in characters"),
        "dropout": HParam(0.0, 0.0, 0.9, help="dropout probability"),
    },
}

#: the hyperparameter of each template whose value bounds the number of pipeline stages
PIPELINE_UNITS: dict[str, str] = {"mlp": "layers", "cnn": "blocks", "gpt": "n_layer"}


def resolve_hyperparameters(template: str, given: dict[str, Any]) -> dict[str, Any]:
    """Merge user values over the template's defaults; raise ValueError naming a bad key."""
    schema = TEMPLATES[template]
    unknown = sorted(set(given) - set(schema))
    if unknown:
        raise ValueError(
            f"unknown hyperparameter(s) for template {template!r}: {', '.join(unknown)}; "
            f"allowed: {', '.join(sorted(schema))}"
        )
    merged = {name: p.default for name, p in schema.items()}
    for name, value in given.items():
        merged[name] = schema[name].check(name, value)
    return merged
