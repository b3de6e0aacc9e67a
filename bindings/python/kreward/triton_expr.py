"""Integer expressions of Triton launch lines (`# kreward: launch ...`),
evaluated per case over the problem's dims and the kernel's meta-parameters:
numbers, names, + - * / // % (integer division, as the library's plan
expressions), unary minus, and min, max, cdiv, next_pow2 (alias
next_power_of_2). Read with ast, never run: the text comes from a policy.

Standalone (no kreward imports): triton_compile_worker.py loads it by path."""
import ast

_FUNCS = {
    "min": min,
    "max": max,
    "cdiv": lambda a, b: -(-a // b),
    "next_pow2": lambda a: 1 if a <= 1 else 1 << (a - 1).bit_length(),
}
_FUNCS["next_power_of_2"] = _FUNCS["next_pow2"]


class ExprError(ValueError):
    pass


def evaluate(text, names):
    """The integer value of `text` with `names` ({name: int}); ExprError
    says what is wrong."""
    try:
        tree = ast.parse(str(text).strip(), mode="eval")
    except SyntaxError:
        raise ExprError(f"'{text}' is not an expression") from None
    return _eval(tree.body, names, text)


def names_in(text):
    """The names an expression reads (functions excluded)."""
    try:
        tree = ast.parse(str(text).strip(), mode="eval")
    except SyntaxError:
        raise ExprError(f"'{text}' is not an expression") from None
    calls = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in calls}


def _eval(node, names, text):
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in names:
            raise ExprError(f"'{text}': unknown name '{node.id}'")
        v = names[node.id]
        if type(v) is not int:
            raise ExprError(f"'{text}': '{node.id}' is {v!r}, not an integer")
        return v
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval(node.operand, names, text)
    if isinstance(node, ast.BinOp):
        a, b = _eval(node.left, names, text), _eval(node.right, names, text)
        op = type(node.op)
        if op is ast.Add:
            return a + b
        if op is ast.Sub:
            return a - b
        if op is ast.Mult:
            return a * b
        if op in (ast.Div, ast.FloorDiv, ast.Mod):
            if b == 0:
                raise ExprError(f"'{text}': division by zero")
            return a % b if op is ast.Mod else a // b
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS
            and not node.keywords):
        args = [_eval(a, names, text) for a in node.args]
        arity = {"min": None, "max": None}.get(node.func.id, 1 if "pow" in node.func.id else 2)
        if (arity is None and len(args) < 2) or (arity is not None and len(args) != arity):
            raise ExprError(f"'{text}': {node.func.id}() takes {arity or 'two or more'} arguments")
        if node.func.id == "cdiv" and args[1] == 0:
            raise ExprError(f"'{text}': division by zero")
        return _FUNCS[node.func.id](*args)
    raise ExprError(f"'{text}': {ast.unparse(node)} is not allowed (numbers, names, + - * / % "
                    "and min, max, cdiv, next_pow2 only)")
