"""``nalasr diagnose``: parse the arguments, call :func:`nalasr.interop.diagnose.diagnose_image`, report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from .app import app, out
from .choices import Variant, value


@app.command("diagnose")
def diagnose_command(
    image: Annotated[str, typer.Argument(metavar="IMAGE", help="The image, taken as the model's LR input.")],
    scale: Annotated[int, typer.Option("--scale", "-s", min=2, max=4, help="Which model: 2, 3 or 4.")] = 4,
    variant: Annotated[Optional[Variant], typer.Option("--variant", show_default=False, help="Shipped variant.")] = None,
    weights: Annotated[Optional[Path], typer.Option("--weights", show_default=False, help="A weights file instead.")] = None,
    device: Annotated[str, typer.Option("--device", help="auto, cpu, cuda or cuda:N.")] = "auto",
    samples: Annotated[int, typer.Option("--samples", min=3, help="Queries sampled per layer (each over all heads).")] = 256,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the query sample.")] = 0,
    plot: Annotated[Optional[Path], typer.Option("--plot", show_default=False, help="Write the figure (PNG).")] = None,
    json_path: Annotated[Optional[Path], typer.Option(
        "--json-out", show_default=False, help="Write every sample's ‖q‖ and entropies as JSON.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the per-layer summary as JSON.")] = False,
) -> None:
    """How the query norm steers attention: entropy of each query's attention over all keys against ‖q‖.

    Softmax attention sharpens (lower entropy) as ‖q‖ grows: the norm is an inverse temperature. Plain linear
    attention loses that (ReLU features are blind to it); NaLa restores it through the query power
    λ(τ + tanh‖q‖). For every NaLa layer this samples queries on IMAGE and computes their exact attention rows
    for NaLa, linear attention (1+ELU, ReLU) and softmax on the same q, k; entropy / log N (1 = uniform) and
    Spearman's ρ against ‖q‖ (negative: larger norm, spikier attention)."""
    from ..interop.diagnose import diagnose_image

    rep = diagnose_image(image, scale=scale, variant=value(variant), weights=str(weights) if weights else None,
                         device=device, samples=samples, seed=seed, plot_path=str(plot) if plot else None)
    if json_path:
        json_path.write_text(json.dumps(rep.to_dict()) + "\n")
    rows = [(l.layer, {m: (l.spearman[m], l.to_dict()["mean_entropy"][m]) for m in l.entropy}) for l in rep.layers]
    if as_json:
        out.print_json(json.dumps({"image_size": rep.image_size, "summary": rep.summary(),
                                   "layers": [{"layer": n, **{m: {"spearman": s, "mean_entropy": e}
                                                              for m, (s, e) in d.items()}} for n, d in rows]}))
        return
    methods = list(rep.layers[0].entropy)
    table = Table(title=f"entropy / log N against ‖q‖ on a {rep.image_size[1]}x{rep.image_size[0]} input "
                        f"({rep.samples} queries a layer): Spearman ρ, mean entropy")
    table.add_column("layer")
    for m in methods:
        table.add_column(m, justify="right")
    for name, d in rows:
        short = name.replace("trunk.groups.", "group ").replace(".blocks.", " block ").replace(".mixer", "")
        table.add_row(short, *(f"{d[m][0]:+.2f}  {d[m][1]:.3f}" for m in methods))
    summ = rep.summary()
    table.add_row("median ρ / mean", *(f"{summ[m]['median_spearman']:+.2f}  {summ[m]['mean_entropy']:.3f}" for m in methods))
    out.print(table)
    if plot:
        out.print(f"figure: {plot}")
