"""``tileiras-run``: run a Tile IR kernel on the reference interpreter.

    tileiras-run kernel.tileir --entry vadd --grid 64 \\
        --arg x.npy --arg 1024 --arg 1 --arg y.npy --arg 1024 --arg 1 --arg out.npy --arg 1024 --arg 1 \\
        --out-dir results/

Each ``--arg`` is an ``.npy`` file (an array: the memory a pointer parameter points at) or a
number (a scalar parameter).  With ``--cutile`` every array expands to cuTile's
(pointer, shape..., strides...) parameters.  After the run each array argument is written to
``OUT_DIR/<its file name>`` (``argN.npy`` when two share a name).  print_tko output goes to
stdout; a failed assert exits with status 1 and its message on stderr.

With ``--device=gpu`` the same command line runs on the GPU instead (``tileiras.gpu``): the
module is compiled by our pipeline for the device's architecture (``--gpu-name`` to choose
another, ``--cubin`` to run a cubin compiled elsewhere, NVIDIA's for instance).  Without a
CUDA driver that is one line, ``error: no CUDA driver ...``, and exit status 1.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional, Sequence

import click
import numpy as np

from ..cli import read_input_file
from ..errors import TileIRError
from . import TileAssertionError, cutile_args, find_entry, launch, normalize_grid


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


def run_on_gpu(module, entry: Optional[str], grid: tuple[int, ...], bound: list[Any],
               gpu_name: Optional[str], cubin_path: Optional[str]) -> bool:
    """Run on the GPU, updating the arrays of ``bound`` in place; True when an assert fired."""
    from .. import gpu

    device = gpu.open_device()  # no driver: fail before compiling anything
    fn = find_entry(module, entry)
    if cubin_path is not None:
        cubin = read_input_file(cubin_path, exit_code=1)
    else:
        cubin = gpu.compile_cubin(module, gpu_name or device.arch)
    outcome = gpu.run_cubin(device, cubin, fn.name, gpu.signature_of(fn), normalize_grid(grid), bound)
    originals = [a for a in bound if isinstance(a, np.ndarray)]
    for original, result in zip(originals, outcome.arrays):
        np.copyto(original, result)
    return outcome.failed


@click.command("tileiras-run")
@click.argument("file")
@click.option("--entry", default=None, help="Entry to run (default: the only one).")
@click.option("--grid", "grid", default="1", help="Tile-block grid, X[,Y[,Z]].")
@click.option("--arg", "args", multiple=True, help="An .npy array or a number, in parameter order.")
@click.option("--cutile", is_flag=True, help="Expand each array into (pointer, shape..., strides...).")
@click.option("--out-dir", type=click.Path(file_okay=False), default=None,
              help="Where to write the arrays after the run.")
@click.option("--device", type=click.Choice(["interp", "gpu"]), default="interp",
              help="Run on the reference interpreter (default) or on the GPU.")
@click.option("--gpu-name", default=None, help="With --device=gpu: compile for this sm_XX (default: the device's).")
@click.option("--cubin", "cubin_path", default=None, help="With --device=gpu: run this cubin instead of compiling.")
def command(file: str, entry: Optional[str], grid: str, args: tuple[str, ...], cutile: bool,
            out_dir: Optional[str], device: str, gpu_name: Optional[str], cubin_path: Optional[str]) -> None:
    from ..reader import read_bytecode

    module = read_bytecode(read_input_file(file, exit_code=1), file)
    values = [parse_arg(a) for a in args]
    bound = cutile_args(*values) if cutile else values
    if device == "gpu":
        if run_on_gpu(module, entry, parse_grid(grid), bound, gpu_name, cubin_path):
            raise TileIRError("a device-side assert fired (the kernel trapped)")
        failures: list = []
    else:
        result = launch(module, entry, parse_grid(grid), bound)
        sys.stdout.write("".join(result.printed))
        failures = result.failures
    if out_dir is not None:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        for i, name in output_names(args).items():
            np.save(Path(out_dir) / name, values[i])
    if failures:
        raise TileAssertionError(failures)


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
