"""kreward episodes in RL environment frameworks: OpenEnv
(kreward.envs.openenv_env, needs openenv-core) and Verifiers
(kreward.envs.verifiers_env, needs verifiers). Import the module you use:
each needs only its own framework."""
