"""``lineage-proxy completion``: the bash script, sourced in a real bash, completes the
CLI's commands, options, choices and file arguments; zsh and fish get theirs."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from proxy.cli.completion import completion_script
from proxy.cli.main import build_parser, main

BASH_SCRIPT = completion_script("bash", build_parser())


def _complete(line: str, cwd=None) -> list[str]:
    """What bash offers for the last word of ``line`` (a trailing space: a new word)."""
    words = line.split(" ")
    program = "\n".join(
        [
            BASH_SCRIPT,
            "complete -p lineage-proxy >&2",  # fails the script if nothing was registered
            "COMP_WORDS=(" + " ".join(f"'{w}'" for w in words) + ")",
            f"COMP_CWORD={len(words) - 1}",
            "_lineage_proxy",
            'printf "%s\\n" "${COMPREPLY[@]}"',
        ]
    )
    done = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", program],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=cwd,
        check=True,
    )
    assert "-F _lineage_proxy lineage-proxy" in done.stderr
    return sorted(word for word in done.stdout.splitlines() if word)


def test_bash_completes_subcommands_from_a_prefix():
    assert _complete("lineage-proxy r") == ["replay", "rules"]
    assert _complete("lineage-proxy re") == ["replay"]
    assert "serve" in _complete("lineage-proxy ")
    assert _complete("lineage-proxy rules ") == ["check", "test"]
    assert _complete("lineage-proxy rules t") == ["test"]


def test_bash_completes_the_options_and_choices_of_the_command_at_hand():
    assert _complete("lineage-proxy serve --") == ["--config", "--help", "--port", "--workers"]
    assert _complete("lineage-proxy rules test --c") == ["--cases", "--config"]
    assert _complete("lineage-proxy --config x.yaml schema ") == ["config", "rules"]
    assert _complete("lineage-proxy completion ") == ["bash", "fish", "zsh"]


def test_bash_completes_files_after_a_path_option_and_nothing_after_a_value(tmp_path):
    (tmp_path / "config.yaml").write_text("")
    (tmp_path / "notes.txt").write_text("")
    assert _complete("lineage-proxy serve --config c", cwd=tmp_path) == ["config.yaml"]
    assert _complete("lineage-proxy serve --port ", cwd=tmp_path) == []


def test_cli_prints_each_shell_script(capsys):
    for shell in ("bash", "zsh", "fish"):
        assert main(["completion", shell]) == 0
        assert "lineage-proxy" in capsys.readouterr().out
    assert completion_script("zsh", build_parser()).startswith("autoload -U +X bashcompinit")
    fish = completion_script("fish", build_parser())
    assert "complete -c lineage-proxy -f -n __fish_use_subcommand -a replay" in fish
    assert "-n '__fish_seen_subcommand_from serve' -l config -r -F" in fish


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_other_shells_parse_their_script(shell):
    assert shutil.which(shell), f"{shell} is needed for this test: apt-get install {shell}"
    check = ["zsh", "-n"] if shell == "zsh" else ["fish", "--no-execute"]
    subprocess.run(check, input=completion_script(shell, build_parser()), text=True, check=True)
