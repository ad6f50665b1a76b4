"""ONNX's Einsum as Tripy ops: each operand's repeated letters become its diagonal, letters no one
else needs are summed away, and operands are multiplied pairwise with one batched ``matmul``
(shared letters kept as batch dims, contracted letters as K), then permuted to the output's order.
``...`` stands for the same leading dims of every operand, broadcast as numpy does."""

from tripy.frontend.ops.creation import iota
from tripy.frontend.ops.elementwise import where
from tripy.frontend.ops.linalg import matmul
from tripy.frontend.ops.reduce import sum
from tripy.frontend.ops.shape_ops import permute, reshape, unsqueeze
from tripy.frontend.trace_call import scalar_like


def parse(equation, ranks):
    """(labels of each operand, labels of the output): lists of letters, ``...`` expanded into
    labels ``"...0"``, ``"...1"`` (the ellipsis's dims, aligned at the right across operands)."""
    text = equation.replace(" ", "")
    lhs, arrow, rhs = text.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise ValueError(f"the equation has {len(terms)} operands, but the node has {len(ranks)} inputs")
    width = 0
    for term, rank in zip(terms, ranks):
        if "..." in term:
            width = max(width, rank - len(term.replace("...", "")))
    ellipsis = [f"...{i}" for i in range(width)]

    def labels(term, rank=None):
        letters = term.replace("...", "")
        if term.count("...") > 1 or (letters and not letters.isalpha()):
            raise ValueError(f"cannot read the term {term!r}")
        head, dots, tail = term.partition("...")
        mid = []
        if dots:
            count = width if rank is None else rank - len(head) - len(tail)
            mid = ellipsis[width - count:]
        out = list(head) + mid + list(tail)
        if rank is not None and len(out) != rank:
            raise ValueError(f"the term {term!r} has {len(out)} labels for an input of rank {rank}")
        return out

    inputs = [labels(t, r) for t, r in zip(terms, ranks)]
    if arrow:
        output = labels(rhs)
    else:
        counts = {}
        for ls in inputs:
            for l in ls:
                counts[l] = counts.get(l, 0) + 1
        output = [l for l in ellipsis if l in counts] + sorted(l for l, c in counts.items() if c == 1 and l[0] != ".")
    return inputs, output


def _diagonal(x, labels):
    """``x`` with each repeated label kept once (its diagonal)."""
    while len(set(labels)) != len(labels):
        label = next(l for l in labels if labels.count(l) > 1)
        i = labels.index(label)
        j = labels.index(label, i + 1)
        shape = [1] * x.rank
        shape[i], shape[j] = x.shape[i], x.shape[j]
        eye = iota(shape, i, x.dtype) == iota(shape, j, x.dtype)
        x = sum(where(eye, x, scalar_like(0, x)), j)
        labels = labels[:j] + labels[j + 1:]
    return x, labels


def _sum_unneeded(x, labels, needed):
    dims = [i for i, l in enumerate(labels) if l not in needed]
    if dims:
        x = sum(x, dims)
        labels = [l for l in labels if l in needed]
    return x, labels


def _size(t, labels, label):
    return t.shape[labels.index(label)]


def _product(sizes):
    out = 1
    for s in sizes:
        out = out * s
    return out


def _contract(a, la, b, lb, keep):
    """a (labels la) times b (labels lb), summing the shared labels not in ``keep``."""
    batch = [l for l in la if l in lb and l in keep]
    inner = [l for l in la if l in lb and l not in keep]
    left = [l for l in la if l not in lb]
    right = [l for l in lb if l not in la]
    a = permute(a, [la.index(l) for l in batch + left + inner])
    b = permute(b, [lb.index(l) for l in batch + inner + right])
    batch_a = [a.shape[i] for i in range(len(batch))]
    batch_b = [b.shape[i] for i in range(len(batch))]
    nb = len(batch)
    m = [a.shape[nb + i] for i in range(len(left))]
    k = [a.shape[nb + len(left) + i] for i in range(len(inner))]
    n = [b.shape[nb + len(inner) + i] for i in range(len(right))]
    a = reshape(a, batch_a + [_product(m), _product(k)])
    b = reshape(b, batch_b + [_product(k), _product(n)])
    out = matmul(a, b)
    out = reshape(out, list(out.shape[:nb]) + m + n)
    return out, batch + left + right


def einsum(equation, operands):
    """The einsum of ``operands`` (tensors) as ``equation`` says."""
    inputs, output = parse(equation, [t.rank for t in operands])
    terms = []
    for t, labels in zip(operands, inputs):
        terms.append(_diagonal(t, labels))
    # Sum each operand's labels that neither the output nor another operand has.
    for i, (t, labels) in enumerate(terms):
        elsewhere = set(output).union(*(set(ls) for j, (_, ls) in enumerate(terms) if j != i))
        terms[i] = _sum_unneeded(t, labels, elsewhere)
    x, labels = terms[0]
    for i in range(1, len(terms)):
        later = set(output).union(*(set(ls) for _, ls in terms[i + 1:]))
        x, labels = _contract(x, labels, *terms[i], later)
    x, labels = _sum_unneeded(x, labels, set(output))
    # A label of the output on no operand cannot be; one missing from labels was a size-1 broadcast.
    for l in output:
        if l not in labels:
            x = unsqueeze(x, x.rank)
            labels = labels + [l]
    x = permute(x, [labels.index(l) for l in output]) if labels != output else x
    return x

