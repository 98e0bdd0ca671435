"""Checks that every relative Markdown link points at an existing file."""
import pathlib
import re
import sys

LINK = re.compile(r"\]\(([^)#]+)\)")
bad = 0
for md in sorted(pathlib.Path(".").rglob("*.md")):
    for target in LINK.findall(md.read_text()):
        if "://" in target:
            continue
        if not (md.parent / target).exists():
            print(f"{md}: broken link {target}")
            bad += 1
print(f"checked links: {bad} broken")
sys.exit(1 if bad else 0)
