"""Integer expressions over knobs and problem dims, in the language of
launch plans (docs/problem-format.md#expressions): + - * / %, unary -,
parentheses, min, max, cdiv, integer constants and names; `/` and `%`
truncate toward zero as in C. Constraints add comparisons (== != < <= >
>=), `and`, `or`, `not`, and True/False.

Parsed with Python's ast (the plan grammar is a subset of Python's
expression syntax) and walked here: nothing is ever passed to eval()."""
import ast
import functools
import operator


class ExprError(ValueError):
    pass


def _cdiv(a, b):
    if b == 0:
        raise ExprError("cdiv by zero")
    return -((-a) // b)


def _div(a, b):
    if b == 0:
        raise ExprError("division by zero")
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _mod(a, b):
    if b == 0:
        raise ExprError("modulo by zero")
    return a - b * _div(a, b)


_BIN = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: _div,
        ast.Mod: _mod}
_CMP = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
        ast.Gt: operator.gt, ast.GtE: operator.ge}
_CALLS = {"min": min, "max": max, "cdiv": _cdiv}


@functools.lru_cache(maxsize=4096)
def parse(text):
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as e:
        raise ExprError(f"{text!r}: {e.msg}") from None
    _check(tree.body, text)
    return tree.body


def _check(node, text):
    ok = (isinstance(node, (ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp, ast.Name,
                            ast.Constant, ast.Call)))
    if isinstance(node, ast.BinOp) and type(node.op) not in _BIN:
        ok = False
    if isinstance(node, ast.UnaryOp) and not isinstance(node.op, (ast.USub, ast.UAdd, ast.Not)):
        ok = False
    if isinstance(node, ast.Compare) and any(type(o) not in _CMP for o in node.ops):
        ok = False
    if isinstance(node, ast.Constant) and not isinstance(node.value, (int, bool)):
        ok = False
    if isinstance(node, ast.Call) and (not isinstance(node.func, ast.Name) or node.keywords or
                                       node.func.id not in _CALLS or len(node.args) != 2):
        ok = False
    if not ok:
        raise ExprError(f"{text!r}: {ast.dump(node)[:60]} is not allowed (integers, names, "
                        "+ - * / %, min/max/cdiv, comparisons, and/or/not)")
    for child in (node.args if isinstance(node, ast.Call) else ast.iter_child_nodes(node)):
        if not isinstance(child, (ast.operator, ast.unaryop, ast.cmpop, ast.boolop,
                                  ast.expr_context)):
            _check(child, text)


def names(text):
    """The names an expression reads (min/max/cdiv excluded)."""
    return {n.id for n in ast.walk(parse(text)) if isinstance(n, ast.Name)} - set(_CALLS) - {
        "True", "False"}


def evaluate(text, env):
    """The value of text with names from env (a mapping of ints)."""
    return _eval(parse(text), env, text)


def _eval(node, env, text):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in env:
            raise ExprError(f"{text!r}: unknown name {node.id!r} (known: {', '.join(sorted(env))})")
        return env[node.id]
    if isinstance(node, ast.BinOp):
        return _BIN[type(node.op)](_eval(node.left, env, text), _eval(node.right, env, text))
    if isinstance(node, ast.UnaryOp):
        v = _eval(node.operand, env, text)
        return not v if isinstance(node.op, ast.Not) else (-v if isinstance(node.op, ast.USub) else v)
    if isinstance(node, ast.Compare):
        left = _eval(node.left, env, text)
        for op, right_node in zip(node.ops, node.comparators):
            right = _eval(right_node, env, text)
            if not _CMP[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.BoolOp):
        is_and = isinstance(node.op, ast.And)
        for v in node.values:
            if bool(_eval(v, env, text)) != is_and:
                return not is_and
        return is_and
    return _CALLS[node.func.id](*(_eval(a, env, text) for a in node.args))
