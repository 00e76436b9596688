"""Hybridizing a model someone else built, as it is: what kind of Block it is, how it runs now,
and the change `hybridize` makes (a `gluon.nn.Sequential` of HybridBlocks first turned into the
`HybridSequential` its author could have written). `tune --` makes the change inside a user's
script; `profile --` times the model alone both ways.
"""


def hybrid_kind(block):
    """'hybrid' for a HybridBlock, 'sequential' for a gluon.nn.Sequential whose Blocks are all
    HybridBlocks (or such Sequentials), which can be a HybridSequential; else 'imperative'."""
    from mxnet import gluon
    if isinstance(block, gluon.HybridBlock):
        return "hybrid"
    if type(block) is gluon.nn.Sequential and all(hybrid_kind(c) != "imperative" for c in block._children.values()):
        return "sequential"
    return "imperative"


def hybrid_mode(block):
    """'none', 'hybrid' or 'static' (static_alloc and static_shape): how a Block runs now."""
    if not getattr(block, "_active", False):
        return "none"
    flags = dict(getattr(block, "_flags", ()))
    return "static" if flags.get("static_alloc") and flags.get("static_shape") else "hybrid"


def as_hybrid_sequential(block):
    """Turn a gluon.nn.Sequential of HybridBlocks (nested Sequentials too) into a HybridSequential,
    in place, with its Blocks and parameters as they are: what writing `nn.HybridSequential()`
    instead of `nn.Sequential()` in the script does. ValueError for any other Block."""
    from mxnet import gluon
    if isinstance(block, gluon.HybridBlock):
        return block
    if hybrid_kind(block) != "sequential":
        raise ValueError("%s is not a Sequential of HybridBlocks: it cannot be hybridized" % type(block).__name__)
    for child in block._children.values():
        as_hybrid_sequential(child)
    fresh = gluon.nn.HybridSequential(prefix=block.prefix)  # the attributes a HybridBlock has, and no Blocks
    for key, value in vars(fresh).items():
        if key not in vars(block):
            object.__setattr__(block, key, value)
    block.__class__ = gluon.nn.HybridSequential
    return block


def hybridize(block, mode):
    """The hybridize lever on the model: `hybrid` or `static`; a Sequential becomes a
    HybridSequential first. Returns what was done, in words."""
    kind = hybrid_kind(block)
    as_hybrid_sequential(block)
    static = mode == "static"
    block.hybridize(static_alloc=static, static_shape=static)
    return "%s%s.hybridize(%s)" % ("HybridSequential, " if kind == "sequential" else "", type(block).__name__,
                                   "static_alloc=True, static_shape=True" if static else "")
