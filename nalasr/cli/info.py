"""``nalasr models``: variants, parameter counts and shipped weights."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from .app import app, out


@app.command("models")
def models(as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False) -> None:
    """List model variants, parameter counts per scale, and which shipped weights exist."""
    from ..io.weights import read_header, shipped_dir, shipped_name  # torch: here, not at --help
    from ..model import SCALES, VARIANTS, count_params, create_model

    rows = []
    for variant in VARIANTS:
        for scale in SCALES:
            path = shipped_dir() / shipped_name(variant, scale)
            card = read_header(path)[1] if path.is_file() else None
            rows.append({
                "variant": variant, "scale": scale, "params": count_params(create_model(variant, scale)),
                "weights": str(path) if card is not None else None,
                "iterations": (card or {}).get("iterations"),
            })
    if as_json:
        out.print_json(json.dumps(rows))
        return
    table = Table(title="NaLaSR variants")
    for col in ("variant", "scale", "params", "shipped weights", "iterations"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["variant"], f"x{r['scale']}", f"{r['params']:,}", r["weights"] or "-", str(r["iterations"] or "-"))
    out.print(table)
