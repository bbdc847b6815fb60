"""Where a ring's transfers go: the link class (within a node or across nodes) a ring of R
ranks placed node by node takes, and which link model stands for it. Imported by both the
cost model (model.py) and the link fits (links.py), so neither imports the other for it."""

CLASSES = ("intra", "inter")


def ring_link(ring_size, per_node, lk):
    """(nodes, crossing hops, link class used, model, fallback note) of a ring of ring_size
    ranks placed node by node with per_node ranks per node."""
    nodes = -(-ring_size // max(per_node, 1))
    crossing = nodes if nodes > 1 else 0
    if nodes <= 1:
        return nodes, 0, "intra", lk.get("intra"), ""
    if lk.get("inter") is not None:
        return nodes, crossing, "inter", lk["inter"], ""
    return nodes, crossing, "intra", lk.get("intra"), (
        "no inter-node link measured or given (--link inter=ALPHA,BETA): the intra-node link "
        "stands in, so this projection is optimistic")
