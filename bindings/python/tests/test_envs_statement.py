"""The environments' catalog (kreward/envs/statement.py) over both kinds: a
KernelBench file is registered by name beside the kreward problems, its
statement shows the Model's file and asks for a ModelNew module, and an
episode's answer is read for that module. (The episodes themselves run
through OpenEnv's and Verifiers' own clients in test_envs_*.py.)"""
from kreward.completion import KERNELBENCH, extract_code
from kreward.envs.statement import Problems
from serve_util import ROOT

KB = ROOT / "examples" / "kernelbench"
RELU = (KB / "level1" / "01_relu.py").read_text()


def test_the_catalog_holds_both_kinds_with_their_statements():
    cat = Problems([str(ROOT / "examples" / "problems"), str(KB)])
    names = cat.distinct_names()
    assert "vector_add" in names and "level1/01_relu" in names
    assert "01_relu" not in names                       # one name per problem
    assert cat.spec("01_relu") == cat.spec("level1/01_relu") == str(KB / "level1" / "01_relu.py")
    text = cat.statement("level1/01_relu")
    assert RELU.strip() in text and "class ModelNew" in text and "```python" in text
    assert "kreward: launch" in cat.statement("vector_add")


def test_an_answer_to_a_kernelbench_statement_is_its_modelnew_block():
    cat = Problems([str(KB)])
    shown = cat.statement("level1/01_relu")
    answer = ("Reasoning first.\n```python\nclass ModelNew:  # draft\n    pass\n```\n"
              "Final:\n```python\nimport torch\nclass ModelNew(torch.nn.Module):\n"
              "    def forward(self, x):\n        return x.clamp_min(0)\n```\n")
    code = extract_code(answer, prompt=shown, kind=KERNELBENCH)
    assert code.startswith("import torch") and "clamp_min" in code
    # quoting the statement's Model back is no answer
    assert extract_code(shown, prompt=shown, kind=KERNELBENCH) is None
