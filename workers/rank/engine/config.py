"""What a rank runs: its environment and the job spec, read once at start."""

from __future__ import annotations

import os
from dataclasses import dataclass

from workers.contract.oom import TEST_OOM_VARIABLE, parse_test_hook
from workers.contract.rank_env import RankEnv
from workers.contract.spec import JobSpec, unsupported_reason
from workers.rank.engine.errors import EngineFailure


@dataclass(frozen=True)
class EngineConfig:
    """The rank's environment plus its validated spec."""

    env: RankEnv
    spec: JobSpec
    #: the test hook's (step, max micro-batch): a host MemoryError injected there (tests only)
    oom_hook: tuple[int, int] | None = None

    @property
    def template(self) -> str:
        assert self.spec.template is not None  # load_config refuses entrypoint specs
        return self.spec.template


def load_config() -> EngineConfig:
    """Read the environment and the spec file; EngineFailure when the engine cannot run it."""
    env = RankEnv.from_env()
    if env is None:
        raise ValueError("TRAINBOARD_ATTEMPT_ID is not set: run ranks through the supervisor")
    spec = JobSpec.model_validate_json(env.spec_file.read_text())
    reason = unsupported_reason(spec)
    if reason is None and spec.template is None:
        reason = "entrypoint jobs run the user's program, not the engine"
    if reason is not None:
        raise EngineFailure(reason)
    hook = parse_test_hook(os.environ.get(TEST_OOM_VARIABLE))
    return EngineConfig(env=env, spec=spec, oom_hook=hook)
