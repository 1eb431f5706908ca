"""The exported quick-start session re-executes and reproduces its numbers (design notes,
"Forks, exports and search").

``notebooks/01_quickstart.ipynb`` runs the scripted penguins analysis in a real kernel
(nbclient); a cell added at its end exports the session with ``%agent_export``. The
exported notebook is then run top to bottom in a fresh kernel, and every code cell's
new output must equal the output the agent recorded when it ran that code.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tests.kernels import kernel_env

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def agent_style(outputs: list[nbformat.NotebookNode]) -> str:
    """A cell's outputs as a ``run_python`` result reads: stdout, then ``[result]``."""
    stdout = "".join(o.text for o in outputs if o.output_type == "stream" and o.name == "stdout")
    results = [o.data["text/plain"] for o in outputs if o.output_type == "execute_result"]
    parts = [stdout.rstrip("\n")] if stdout else []
    parts += [f"[result]\n{text}" for text in results]
    return "\n".join(parts) + "\n"


@pytest.mark.slow
def test_exported_quickstart_reproduces_its_numbers(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in kernel_env().items():
        monkeypatch.setenv(name, value)
    for name in ("JUPYTER_AGENT_MEMORY_DIR", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    quickstart = nbformat.read(NOTEBOOKS / "01_quickstart.ipynb", as_version=4)
    exported = tmp_path / "penguins.ipynb"
    quickstart.cells.insert(len(quickstart.cells) - 1, nbformat.v4.new_code_cell(
        f"%agent_export --format ipynb -o {exported}"))
    NotebookClient(quickstart, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    said = "".join(o.get("text", "") for o in quickstart.cells[-2].outputs)
    assert said.startswith("Exported session ") and str(exported) in said

    replay = nbformat.read(exported, as_version=4)
    nbformat.validate(replay)
    recorded = [(c.source, "".join(o.get("text", "") for o in c.outputs),
                 agent_style(c.outputs), c.metadata.get("tags", []))
                for c in replay.cells if c.cell_type == "code"]  # as recorded
    plot = [c for c in replay.cells if c.cell_type == "code"][-1]  # the figure the agent made
    (figure,) = [o for o in plot.outputs if o.output_type == "display_data"]
    assert figure.data["image/png"] and figure.data["text/plain"].startswith("[figure 1: PNG, ")
    assert [source.splitlines()[0] for source, *_ in recorded] == [
        "from palmerpenguins import load_penguins",
        'body_mass = penguins.groupby("species")["body_mass_g"].mean().round(1)',
        "missing = penguins.isna().sum()",
        'df["flipper_length_mm"].corr(df["body_mass_g"])',
        'flipper_vs_mass = penguins["flipper_length_mm"].corr(penguins["body_mass_g"])',
        "import matplotlib.pyplot as plt",
    ]
    NotebookClient(replay, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    rerun = [c for c in replay.cells if c.cell_type == "code"]
    for (source, before, style, tags), cell in zip(recorded, rerun, strict=True):
        if "raises-exception" in tags:  # the agent's failed attempt fails again, the same way
            errors = [o for o in cell.outputs if o.output_type == "error"]
            assert len(errors) == 1 and errors[0].ename in before, source
        else:
            assert agent_style(cell.outputs) == style, source
    assert agent_style(rerun[-2].outputs) == "Pearson r = 0.871\n"
    assert agent_style(rerun[-1].outputs) == "342 penguins plotted\n"
    assert [o.output_type for o in rerun[-1].outputs].count("display_data") == 1
    assert "Gentoo       5076.0" in agent_style(rerun[1].outputs)
