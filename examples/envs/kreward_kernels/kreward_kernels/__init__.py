"""The `kreward-kernels` Verifiers environment: kreward's kernel-writing
episode (kreward.envs.verifiers_env) under the top-level module name that
Verifiers looks a taskset id up by (`vf-eval kreward-kernels`)."""
from kreward.envs.verifiers_env import KernelChatHarness, KernelEnv, KernelTaskset

__all__ = ["KernelTaskset", "KernelEnv", "KernelChatHarness"]
