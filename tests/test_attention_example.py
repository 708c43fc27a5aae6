import runpy
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_worked_example_prints_the_weights_and_output_the_readme_quotes(capsys):
    runpy.run_path(str(ROOT / "scripts" / "attention_example.py"), run_name="__main__")
    printed = capsys.readouterr().out
    assert "[0.401, 0.198, 0.401]" in printed and "[1.604, 0.797]" in printed
