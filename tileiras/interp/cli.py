"""``tileiras-run``: run a Tile IR kernel on the reference interpreter.

    tileiras-run kernel.tileir --entry vadd --grid 64 \\
        --arg x.npy --arg 1024 --arg 1 --arg y.npy --arg 1024 --arg 1 --arg out.npy --arg 1024 --arg 1 \\
        --out-dir results/

Each ``--arg`` is an ``.npy`` file (an array: the memory a pointer parameter points at) or a
number (a scalar parameter).  With ``--cutile`` every array expands to cuTile's
(pointer, shape..., strides...) parameters.  After the run each array argument is written to
``OUT_DIR/<its file name>`` (``argN.npy`` when two share a name).  print_tko output goes to
stdout; a failed assert exits with status 1 and its message on stderr.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional, Sequence

import click
import numpy as np

from ..errors import TileIRError
from . import TileAssertionError, cutile_args, launch


def parse_grid(text: str) -> tuple[int, ...]:
    try:
        dims = tuple(int(p) for p in text.replace("x", ",").split(",") if p.strip())
    except ValueError:
        raise click.BadParameter(f"expected X[,Y[,Z]], got {text!r}") from None
    if not 1 <= len(dims) <= 3:
        raise click.BadParameter(f"expected 1 to 3 extents, got {text!r}")
    return dims


def parse_arg(text: str) -> Any:
    if text.endswith(".npy"):
        return np.load(text)
    for kind in (int, float):
        try:
            return kind(text, 0) if kind is int else kind(text)
        except ValueError:
            continue
    raise click.BadParameter(f"--arg {text!r} is neither an .npy file nor a number")


def output_names(args: Sequence[str]) -> dict[int, str]:
    """Argument index -> output file name, for every .npy argument."""
    names: dict[int, str] = {}
    seen: set[str] = set()
    for i, text in enumerate(args):
        if text.endswith(".npy"):
            name = Path(text).name
            names[i] = name if name not in seen else f"arg{i}.npy"
            seen.add(name)
    return names


@click.command("tileiras-run")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--entry", default=None, help="Entry to run (default: the only one).")
@click.option("--grid", "grid", default="1", help="Tile-block grid, X[,Y[,Z]].")
@click.option("--arg", "args", multiple=True, help="An .npy array or a number, in parameter order.")
@click.option("--cutile", is_flag=True, help="Expand each array into (pointer, shape..., strides...).")
@click.option("--out-dir", type=click.Path(file_okay=False), default=None,
              help="Where to write the arrays after the run.")
def command(file: str, entry: Optional[str], grid: str, args: tuple[str, ...], cutile: bool,
            out_dir: Optional[str]) -> None:
    values = [parse_arg(a) for a in args]
    bound = cutile_args(*values) if cutile else values
    result = launch(file, entry, parse_grid(grid), bound)
    sys.stdout.write("".join(result.printed))
    if out_dir is not None:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        for i, name in output_names(args).items():
            np.save(Path(out_dir) / name, values[i])
    if result.failures:
        raise TileAssertionError(result.failures)


def main(argv: Optional[Sequence[str]] = None) -> int:
    try:
        command.main(args=list(argv) if argv is not None else None, standalone_mode=False)
    except click.ClickException as err:
        err.show()
        return 2
    except TileIRError as err:
        click.echo(str(err), err=True)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
