"""A bounded YAML loader: the limits PyYAML lacks, checked while composing.

PyYAML builds aliases as shared references, so an alias bomb parses in
milliseconds and explodes later, in whoever walks the value (Core's JSON Schema
validation reached 22.7 GB); a recursive alias (``&a [*a]``) makes a value that
contains itself; 5,000 nested ``[`` exhaust Python's recursion limit inside the
composer. The loader here counts while it composes and stops at the first
overrun, before anything is constructed:

* collection depth, anchors and aliases (each against :class:`IntakeLimits`);
* an alias to a collection still being composed (a recursive value) is refused;
* after composition, the size of the value *as a consumer sees it* (nodes and
  scalar characters with every alias expanded) is computed on the node graph
  in O(nodes), memoized, so the bound is exact without expanding anything.

Every refusal is a :class:`YamlLimitError`, a ``yaml.YAMLError``: ``fcop``
already maps ``yaml.YAMLError`` to ``INVALID_ENVELOPE``, which is why
:func:`harden_fcop` can install the same loader into Core (``fcop`` parses every
TASK in every stage on each ``create_task``, in baton's own process).
"""

from __future__ import annotations

import threading
from typing import Any, ClassVar, Literal

import yaml
from yaml.events import AliasEvent, MappingStartEvent, SequenceStartEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from baton.errors import RemoteFault
from baton.fcop_errors import CoordinationError
from baton.intake.limits import DEFAULT_LIMITS, IntakeLimits

__all__ = [
    "FCOP_VERSION",
    "YamlLimitError",
    "YamlLimitReason",
    "bounded_loader",
    "expanded_size",
    "flow_depth",
    "harden_fcop",
]

FCOP_VERSION = "4.0.5"
"""The ``fcop`` release whose private loader :func:`harden_fcop` replaces (pinned)."""

YamlLimitReason = Literal[
    "front_matter_too_large",
    "yaml_too_deep",
    "yaml_anchors",
    "yaml_aliases",
    "yaml_recursive_alias",
    "yaml_expansion",
]


class YamlLimitError(yaml.YAMLError, CoordinationError, RemoteFault):  # type: ignore[misc]
    """A document over one of the intake limits; ``reason`` names which."""

    def __init__(self, reason: YamlLimitReason, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason: YamlLimitReason = reason
        self.detail = detail


def expanded_size(root: Node, limits: IntakeLimits) -> tuple[int, int]:
    """(nodes, scalar characters) of ``root`` with aliases expanded; raises past the limits."""
    memo: dict[int, tuple[int, int]] = {}

    def size(node: Node) -> tuple[int, int]:
        known = memo.get(id(node))
        if known is not None:
            return known
        nodes, chars = 1, 0
        if isinstance(node, ScalarNode):
            chars = len(node.value)
        elif isinstance(node, SequenceNode):
            for child in node.value:
                n, c = size(child)
                nodes, chars = nodes + n, chars + c
        elif isinstance(node, MappingNode):
            for key, value in node.value:
                for child in (key, value):
                    n, c = size(child)
                    nodes, chars = nodes + n, chars + c
        if nodes > limits.max_nodes:
            raise YamlLimitError(
                "yaml_expansion", f"more than {limits.max_nodes} nodes once aliases are expanded"
            )
        if chars > limits.max_expanded_chars:
            raise YamlLimitError(
                "yaml_expansion",
                f"more than {limits.max_expanded_chars} scalar characters once aliases are expanded",
            )
        memo[id(node)] = (nodes, chars)
        return nodes, chars

    return size(root)


def flow_depth(text: str) -> int:
    """An upper bound of the flow nesting (``[``/``{``) opened on any one line, in O(n).

    PyYAML's scanner keeps a possible simple key per open flow level and re-checks
    them all at each token until the line ends, so nesting opened on one line is
    quadratic (5,000 ``[`` take seconds before the composer sees the first event,
    where its depth limit would apply). Across lines the keys go stale and the
    composer's limit is enough. So each line's brackets are counted as written,
    quotes included: it can over-count (brackets in a quoted scalar), never under-count.
    """
    deepest = 0
    for line in text.split("\n"):
        if "[" not in line and "{" not in line:
            continue
        depth = 0
        for ch in line:
            if ch in "[{":
                depth += 1
                deepest = max(deepest, depth)
            elif ch in "]}" and depth:
                depth -= 1
    return deepest


class _Bounded:
    """Mixin over a PyYAML ``Loader``: counts while composing (see the module docstring)."""

    _intake_limits: ClassVar[IntakeLimits] = DEFAULT_LIMITS
    _baton_bounded: ClassVar[bool] = True

    def __init__(self, stream: Any) -> None:
        limits = self._intake_limits
        if isinstance(stream, bytes | str):
            size = (
                len(stream.encode("utf-8", "surrogatepass"))
                if isinstance(stream, str)
                else len(stream)
            )
            if size > limits.max_frontmatter_bytes:
                raise YamlLimitError(
                    "front_matter_too_large",
                    f"{size} bytes of front matter, over the {limits.max_frontmatter_bytes}-byte limit",
                )
            text = stream if isinstance(stream, str) else stream.decode("utf-8", "replace")
            if flow_depth(text) > limits.max_depth:
                raise YamlLimitError(
                    "yaml_too_deep", f"flow collections nested more than {limits.max_depth} deep"
                )
        super().__init__(stream)  # type: ignore[call-arg]
        self._depth = 0
        self._anchors = 0
        self._aliases = 0
        self._open: set[str] = set()

    def compose_node(self, parent: Node | None, index: object) -> Node:
        limits = self._intake_limits
        event = self.peek_event()  # type: ignore[attr-defined]
        if isinstance(event, AliasEvent):
            self._aliases += 1
            if self._aliases > limits.max_aliases:
                raise YamlLimitError("yaml_aliases", f"more than {limits.max_aliases} aliases")
            if event.anchor in self._open:
                raise YamlLimitError(
                    "yaml_recursive_alias", f"alias *{event.anchor} refers to its own collection"
                )
            return super().compose_node(parent, index)  # type: ignore[misc]
        anchor = getattr(event, "anchor", None)
        if anchor is not None:
            self._anchors += 1
            if self._anchors > limits.max_anchors:
                raise YamlLimitError("yaml_anchors", f"more than {limits.max_anchors} anchors")
        if not isinstance(event, SequenceStartEvent | MappingStartEvent):
            return super().compose_node(parent, index)  # type: ignore[misc]
        self._depth += 1
        if self._depth > limits.max_depth:
            raise YamlLimitError(
                "yaml_too_deep", f"collections nested more than {limits.max_depth} deep"
            )
        if anchor is not None:
            self._open.add(anchor)
        try:
            return super().compose_node(parent, index)  # type: ignore[misc]
        finally:
            self._depth -= 1
            if anchor is not None:
                self._open.discard(anchor)

    def get_single_node(self) -> Node | None:
        node: Node | None = super().get_single_node()  # type: ignore[misc]
        if node is not None:
            expanded_size(node, self._intake_limits)
        return node


def bounded_loader(
    base: type[Any], limits: IntakeLimits = DEFAULT_LIMITS
) -> type[Any]:  # PyYAML loader classes: yaml has no types here
    """A subclass of the PyYAML loader ``base`` enforcing ``limits`` (constructors kept)."""
    return type(
        f"Bounded{base.__name__}",
        (_Bounded, base),
        {"_intake_limits": limits, "__module__": __name__},
    )


_HARDEN_LOCK = threading.Lock()


def harden_fcop(limits: IntakeLimits = DEFAULT_LIMITS) -> type[Any]:  # a PyYAML loader class
    """Bound every envelope parse Core does in this process; returns the loader in use.

    ``fcop.v4.encoding._parse_envelope_bytes`` looks its loader up by module global
    at each call, so replacing ``_UniqueLoader`` with a bounded subclass (same
    duplicate-key constructor) covers every caller, including the imports of
    ``parse_envelope`` by name in Core's other modules. The name is private, so the
    pinned release is checked and a mismatch fails loudly instead of leaving Core
    unbounded. Idempotent.
    """
    import fcop
    from fcop.v4 import encoding

    with _HARDEN_LOCK:
        current = getattr(encoding, "_UniqueLoader", None)
        if current is None or getattr(fcop, "__version__", None) != FCOP_VERSION:
            raise RuntimeError(
                f"fcop {getattr(fcop, '__version__', '?')}: baton bounds Core's YAML loader "
                f"through fcop {FCOP_VERSION}'s private fcop.v4.encoding._UniqueLoader; "
                "re-check that seam before upgrading"
            )
        if getattr(current, "_baton_bounded", False):
            return current  # type: ignore[no-any-return]
        loader = bounded_loader(current, limits)
        setattr(encoding, "_UniqueLoader", loader)  # noqa: B010 - see the docstring
        return loader
