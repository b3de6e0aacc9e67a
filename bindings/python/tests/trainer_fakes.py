"""Stand-ins for the trainer tests on a machine without a GPU.

FakeEvaluator is the library's StandIn backend (kreward/backends/standin.py)
with the marker `// fake: VERDICT [SPEEDUP]`; its reports are scored by the
library's real reward. Problems are parsed by the library (a bad one raises).
Sample is slime's Sample with the fields the adapter reads
(slime/utils/types.py:94-151 at 624b824)."""
import dataclasses

from kreward.backends.standin import StandIn
from kreward.backends.standin import candidate as _candidate


def candidate(verdict, speedup=None, body="x[0] = 1;"):
    """A completion whose kernel the fake evaluator judges `verdict`."""
    return _candidate(verdict, speedup, body, marker="fake")


class FakeEvaluator(StandIn):
    """The library's stand-in backend (kreward/backends/standin.py), its
    verdicts written `// fake: VERDICT [SPEEDUP]`, and the Evaluator's
    fallback of 0.0 (the trainer tests read it where a trainer needs a
    number)."""
    marker = "fake"

    def __init__(self, reward="makora", fallback=0.0, raise_error=None):
        super().__init__(reward, fallback, raise_error)


@dataclasses.dataclass
class Sample:
    prompt: object = ""
    response: str = ""
    label: object = None
    reward: object = None
    metadata: dict = dataclasses.field(default_factory=dict)

    def get_reward_value(self, args):  # slime/utils/types.py:246-247
        return self.reward if not args.reward_key else self.reward[args.reward_key]
