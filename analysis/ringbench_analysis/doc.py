"""The report as sections of blocks, for its two renderers.

The section builders (report.py, headline.py, schemes.py, scheme_report.py, contention_report.py)
write Markdown lines; parse() reads them once into blocks (heading, paragraph, bullets, table,
image, code), which keep their source lines. report.md is those lines (markdown()), byte for
byte what the builders wrote; report.html (html_report.py) renders the same blocks' structure,
so a number can never differ between the two. Only the Markdown the builders write is read:
headings, paragraphs, "- " bullets (nested by two spaces), pipe tables, images, fenced code.
"""
import html
import re


class Block:
    """One block: `kind` and its Markdown `lines`, with what the HTML needs:
    heading: level, text; paragraph: texts (one per source line); bullets: items [(depth, text)];
    table: headers, rows; image: title, src; code: lang, code."""

    def __init__(self, kind, lines, **fields):
        self.kind = kind
        self.lines = lines
        self.__dict__.update(fields)

    def __repr__(self):
        return f"Block({self.kind}, {self.lines[:1]}...)"


class Section:
    """A top-level part of the report: `key` (summary, ring, ...), `title` (its first heading,
    "" where it has none) and its blocks."""

    def __init__(self, key, blocks):
        self.key = key
        self.blocks = blocks
        head = next((b for b in blocks if b.kind == "heading"), None)
        self.title = head.text if head else ""

    def tables(self):
        return [b for b in self.blocks if b.kind == "table"]


def _line_kind(line):
    if line.startswith("```"):
        return "code"
    if line.startswith("#"):
        return "heading"
    if line.startswith("|"):
        return "table"
    if re.match(r"^\s*- ", line):
        return "bullets"
    if re.match(r"^!\[[^\]]*\]\([^)]*\)$", line):
        return "image"
    return "blank" if not line.strip() else "paragraph"


def parse(lines):
    """Markdown lines (a line may hold several, joined by newlines) -> [Block]. A blank line
    is a block of its own, so markdown() gives back exactly the lines given."""
    flat = [x for line in lines for x in str(line).split("\n")]
    blocks, i = [], 0
    while i < len(flat):
        kind = _line_kind(flat[i])
        if kind == "code":
            end = next((j for j in range(i + 1, len(flat)) if flat[j].startswith("```")), len(flat) - 1)
            blocks.append(_block("code", flat[i:end + 1]))
            i = end + 1
            continue
        j = i + 1
        if kind in ("table", "bullets", "paragraph"):  # runs of lines of one kind form one block
            while j < len(flat) and _line_kind(flat[j]) == kind:
                j += 1
        blocks.append(_block(kind, flat[i:j]))
        i = j
    return blocks


def _cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _block(kind, lines):
    if kind == "heading":
        marks = len(lines[0]) - len(lines[0].lstrip("#"))
        return Block(kind, lines, level=marks, text=lines[0][marks:].strip())
    if kind == "table":
        body = [x for x in lines[1:] if not re.match(r"^\|(-+\|)+$", x.strip())]
        return Block(kind, lines, headers=_cells(lines[0]), rows=[_cells(x) for x in body])
    if kind == "bullets":
        items = [((len(x) - len(x.lstrip())) // 2, x.strip()[2:]) for x in lines]
        return Block(kind, lines, items=items)
    if kind == "image":
        m = re.match(r"^!\[([^\]]*)\]\(([^)]*)\)$", lines[0])
        return Block(kind, lines, title=m.group(1), src=m.group(2))
    if kind == "code":
        closed = len(lines) > 1 and lines[-1].startswith("```")
        return Block(kind, lines, lang=lines[0][3:].strip(),
                     code="\n".join(lines[1:-1] if closed else lines[1:]))
    return Block(kind, lines, texts=list(lines))


def sections(parts):
    """[(key, Markdown lines)] -> [Section]; parts without any line are left out."""
    return [Section(key, parse(lines)) for key, lines in parts if lines]


def markdown(secs):
    """The Markdown lines of the sections: their source lines, in order."""
    return [x for s in secs for b in s.blocks for x in b.lines]


_INLINE = re.compile(r"`([^`]+)`|\*\*(.+?)\*\*|\[([^\]]+)\]\(([^)\s]+)\)")


def inline_html(text):
    """One line of Markdown text -> HTML: `code`, **bold** and [text](link); everything else
    escaped. Links are kept only where they point at a file beside the report or an anchor
    (a report written for offline reading names no web address to fetch)."""
    out, pos = [], 0
    for m in _INLINE.finditer(text):
        out.append(html.escape(text[pos:m.start()]))
        code, bold, label, href = m.groups()
        if code is not None:
            out.append(f"<code>{html.escape(code)}</code>")
        elif bold is not None:
            out.append(f"<strong>{inline_html(bold)}</strong>")
        elif re.match(r"^[a-z]+:", href):
            out.append(f"{html.escape(label)} ({html.escape(href)})")
        else:
            out.append(f'<a href="{html.escape(href)}">{html.escape(label)}</a>')
        pos = m.end()
    out.append(html.escape(text[pos:]))
    return "".join(out)


def plain(text):
    """The text of one Markdown line without its marks (what a reader sees)."""
    return html.unescape(re.sub(r"<[^>]+>", "", inline_html(text)))
