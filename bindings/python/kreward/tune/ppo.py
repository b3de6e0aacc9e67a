"""A small PPO policy over a knob space (needs torch).

The policy reads the environment's observation (problem features and the
last result) and outputs one categorical distribution per knob (a
factorised MultiDiscrete policy) and a value. Each iteration samples
`batch_size` assignments from the current observation, evaluates them as
one batch (spread over the backend's GPUs), and takes `epochs` clipped
policy-gradient steps with the advantage reward - value, normalised over
the batch, plus a value loss and an entropy bonus. Rewards are divided by
the largest magnitude seen so far, so presets of any scale train alike. Tuning has no long
horizon: an episode is one batch, so the return is the reward itself.

Memoised assignments (and those a constraint rules out) are free: when the policy keeps proposing configurations
it has seen, iterations cost nothing but also add nothing, so the run also
stops after max_batches iterations (default 4x the batches the budget
needs, plus 8)."""
import math


def _torch():
    try:
        import torch
    except ImportError as e:
        raise ImportError("strategy='ppo' needs torch (pip install torch); random and grid "
                          "do not") from e
    return torch


def make_policy(obs_dim, nvec, hidden=64):
    torch = _torch()
    nn = torch.nn

    class Policy(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(obs_dim, hidden), nn.Tanh(),
                                      nn.Linear(hidden, hidden), nn.Tanh())
            self.heads = nn.ModuleList(nn.Linear(hidden, n) for n in nvec)
            self.value = nn.Linear(hidden, 1)

        def forward(self, obs):
            h = self.body(obs)
            return [head(h) for head in self.heads], self.value(h).squeeze(-1)

    return Policy()


def _log_prob_entropy(torch, logits, actions):
    logp, ent = 0, 0
    for k, lg in enumerate(logits):
        d = torch.distributions.Categorical(logits=lg)
        logp = logp + d.log_prob(actions[:, k])
        ent = ent + d.entropy()
    return logp, ent


def _trim_to_budget(env, assignments):
    """Keeps free assignments (memoised, or ruled out by a constraint) and
    new ones up to the budget left."""
    left = (env.max_evals - env.evaluations) if env.max_evals is not None else len(assignments)
    cases = env.kernel.cases(env.ctx)
    keep, new = [], set()
    for i, a in enumerate(assignments):
        key = env.space.key(a)
        if env.cached(a) is not None or key in new or env.space.violated(a, cases):
            keep.append(i)
        elif len(new) < left:
            new.add(key)
            keep.append(i)
    return keep


def run_ppo(env, batch_size=8, seed=0, hidden=64, lr=0.01, epochs=4, clip=0.2, entropy=0.01,
            value_coef=0.5, max_batches=None):
    """Runs PPO on env until its budget (env.max_evals) is spent or
    max_batches iterations pass; the results are in env.history. Returns
    the policy."""
    torch = _torch()
    torch.manual_seed(seed)
    obs = env._obs()
    policy = make_policy(len(obs), env.space.nvec, hidden)
    opt = torch.optim.Adam(policy.parameters(), lr=lr)
    if max_batches is None:
        budget = env.max_evals or 64
        max_batches = 4 * math.ceil(budget / batch_size) + 8
    scale = 1e-6  # the largest |reward| seen: rewards / scale stay in [-1, 1] and keep one scale
    for _ in range(max_batches):
        if env.exhausted:
            break
        o = torch.as_tensor(list(obs), dtype=torch.float32)
        with torch.no_grad():
            logits, _ = policy(o)
            actions = torch.stack([torch.distributions.Categorical(logits=lg).sample((batch_size,))
                                   for lg in logits], dim=1)
        assignments = [env.space.decode(a) for a in actions.tolist()]
        keep = _trim_to_budget(env, assignments)
        if not keep:
            break
        actions = actions[keep]
        with torch.no_grad():
            logits, value = policy(o)
            old_logp, _ = _log_prob_entropy(torch, [lg.expand(len(keep), -1) for lg in logits],
                                            actions)
        obs, rewards, _, _, _ = env.step_batch([assignments[i] for i in keep])
        r = torch.as_tensor(rewards, dtype=torch.float32)
        scale = max(scale, float(r.abs().max()))
        r = r / scale
        adv = r - value
        if len(keep) > 1:
            adv = (adv - adv.mean()) / (adv.std() + 1e-6)
        for _ in range(epochs):
            logits, v = policy(o)
            logp, ent = _log_prob_entropy(torch, [lg.expand(len(keep), -1) for lg in logits],
                                          actions)
            ratio = torch.exp(logp - old_logp)
            pg = -torch.min(ratio * adv, torch.clamp(ratio, 1 - clip, 1 + clip) * adv).mean()
            loss = pg + value_coef * ((v - r) ** 2).mean() - entropy * ent.mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    return policy
