"""py-spy's folded stacks (`--format raw`): one line per distinct stack, its frames from
the outermost to the innermost joined by `;`, then the number of samples. With
`--subprocesses` each stack starts with a frame per process (`process 12:"argv"`); they
are dropped, so the workers' samples of the same code add up."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

# Distinct stacks kept: a profile of a few seconds has a few hundred; past this, the rarest
# go (their samples still count in the total).
MAX_STACKS = 5000


def read_folded(path: Path) -> Counter[str]:
    """The samples of each stack in a folded file, process frames dropped."""
    stacks: Counter[str] = Counter()
    with path.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if not stack or not count.isdigit():
                continue
            frames = [frame for frame in stack.split(";") if not frame.startswith("process ")]
            if frames:
                stacks[";".join(frames)] += int(count)
    return stacks


def kept(stacks: Counter[str]) -> list[tuple[str, int]]:
    """The stacks as stored: most samples first, at most MAX_STACKS."""
    return stacks.most_common(MAX_STACKS)
