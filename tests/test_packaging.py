"""`pip install .` (not editable) gives a package that runs from any folder: the wheel holds
every config file as vla/conf/ and a `vla-<name>` command for each script with one."""

import configparser
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ["pyproject.toml", "setup.py", "README.md", "vla", "conf"]  # what the build reads


@pytest.mark.slow
def test_the_wheel_ships_every_config_file_and_a_command_per_script(tmp_path):
    source = tmp_path / "source"  # a copy: building writes build/ and *.egg-info beside it
    source.mkdir()
    for name in SOURCE:
        if (ROOT / name).is_dir():
            ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
            shutil.copytree(ROOT / name, source / name, ignore=ignore)
        else:
            shutil.copy(ROOT / name, source / name)
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    done = subprocess.run(
        [*build, "--wheel-dir", str(tmp_path), str(source)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (wheel,) = tmp_path.glob("vla-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())

    configs = {
        f"vla/conf/{p.relative_to(ROOT / 'conf').as_posix()}"
        for p in (ROOT / "conf").rglob("*.yaml")
    }
    assert len(configs) > 40 and configs <= names, sorted(configs - names)
    code = {p.relative_to(ROOT).as_posix() for p in (ROOT / "vla").rglob("*.py")}
    assert code <= names, sorted(code - names)

    (entry_points,) = (n for n in names if n.endswith(".dist-info/entry_points.txt"))
    parser = configparser.ConfigParser()
    parser.read_string(zipfile.ZipFile(wheel).read(entry_points).decode())
    commands = {
        f"vla-{p.stem}": f"vla.commands.{p.stem}:main"
        for p in (ROOT / "vla" / "commands").glob("[!_]*.py")
    }
    assert dict(parser["console_scripts"]) == commands
    scripts = {p.stem for p in (ROOT / "scripts").glob("*.py")} - {"attention_example"}
    assert {f"vla-{s}" for s in scripts} == commands.keys()
