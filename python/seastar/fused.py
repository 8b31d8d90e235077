"""The fused backend's Python side (filled by the fused-path runtime)."""


def available(compiled, tensors) -> bool:
    return False


def why_unavailable(compiled, tensors) -> str:
    return "the fused CPU backend is not built yet"


def run(compiled, graph, tensors):
    raise NotImplementedError(why_unavailable(compiled, tensors))
