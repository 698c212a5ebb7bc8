"""A flame graph as inline SVG, built here from folded stacks: no script, no network.

Each frame is a box as wide as its share of the samples, over its caller (the outermost
frame at the bottom); hovering a box shows the function, its samples and their share.
Boxes narrower than MIN_WIDTH are left out, with their callees.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from html import escape

WIDTH = 1200.0
ROW = 17.0
MIN_WIDTH = 0.5
# About how wide a character of the 11px labels is.
CHAR_W = 6.6


@dataclass
class Frame:
    name: str
    samples: int = 0
    callees: dict[str, Frame] = field(default_factory=dict)


def frame_tree(stacks: list[tuple[str, int]]) -> Frame:
    """The stacks merged from the outermost frame in: a root over all of them."""
    root = Frame("all")
    for stack, n in stacks:
        root.samples += n
        node = root
        for name in stack.split(";"):
            node = node.callees.setdefault(name, Frame(name))
            node.samples += n
    return root


def _depth(frame: Frame, scale: float) -> int:
    shown = [c for c in frame.callees.values() if c.samples * scale >= MIN_WIDTH]
    return 1 + max((_depth(c, scale) for c in shown), default=0)


def _colour(name: str) -> str:
    """A warm colour fixed by the function's name, so it keeps its colour across runs."""
    h = zlib.crc32(name.encode())
    return f"rgb({205 + h % 50},{80 + (h >> 8) % 130},{40 + (h >> 16) % 50})"


def _label(name: str, width: float) -> str:
    fits = int((width - 6) / CHAR_W)
    if fits < 3:
        return ""
    return name if len(name) <= fits else name[: fits - 1] + "…"


def _boxes(
    frame: Frame, x: float, level: int, height: float, scale: float, total: int
) -> list[str]:
    width = frame.samples * scale
    y = height - (level + 1) * ROW
    title = f"{frame.name} — {frame.samples} samples ({100 * frame.samples / total:.1f}%)"
    label = _label(frame.name, width)
    out = [
        f'<g><title>{escape(title)}</title><rect x="{x:.1f}" y="{y:.1f}" '
        f'width="{width:.1f}" height="{ROW - 1:.0f}" rx="2" fill="{_colour(frame.name)}"/>'
        + (f'<text x="{x + 3:.1f}" y="{y + 12:.1f}">{escape(label)}</text>' if label else "")
        + "</g>"
    ]
    for callee in sorted(frame.callees.values(), key=lambda c: c.name):
        if callee.samples * scale >= MIN_WIDTH:
            out += _boxes(callee, x, level + 1, height, scale, total)
        x += callee.samples * scale
    return out


def flame_svg(stacks: list[tuple[str, int]], label: str) -> str | None:
    """The flame graph of the stacks, an <svg> element; None without samples."""
    root = frame_tree(stacks)
    if root.samples == 0:
        return None
    scale = WIDTH / root.samples
    height = _depth(root, scale) * ROW
    boxes = _boxes(root, 0.0, 0, height, scale, root.samples)
    return (
        f'<svg class="flame" role="img" aria-label="{escape(label)}" width="100%" '
        f'viewBox="0 0 {WIDTH:.0f} {height:.0f}" xmlns="http://www.w3.org/2000/svg" '
        'font-family="monospace" font-size="11">' + "".join(boxes) + "</svg>"
    )
