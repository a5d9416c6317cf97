"""Parsers for what `nvidia-smi` and `lspci` print, so that `probe --from FILE` reads a
machine from the text its user saved or pasted: `nvidia-smi topo -m`, `nvidia-smi -q`,
`nvidia-smi --query-gpu=... --format=csv`, plain `nvidia-smi` and `lspci -vv`. One file
may hold several of them; each parser takes what it recognises. Every parser returns
{gpu index: {field: value}} (fields as probe.GpuInfo's), and parse_topo also the links."""

import re

from decodescope.errors import DecodescopeError

ANSI = re.compile(r"\x1b\[[0-9;]*m|\[[0-9;]*m")
# PCIe transfer rate (GT/s) -> generation
GT_S = {"2.5": 1, "5": 2, "5.0": 2, "8": 3, "8.0": 3, "16": 4, "16.0": 4, "32": 5, "32.0": 5, "64": 6, "64.0": 6}
MIB = 1 << 20


def kinds(text: str) -> list[str]:
    """The outputs a text holds, in a fixed order."""
    found = []
    if re.search(r"^\s*GPU0\s+X\b", ANSI.sub("", text), re.M):
        found.append("topo")
    if "NVSMI LOG" in text or re.search(r"^GPU [0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:", text, re.M):
        found.append("smi-q")
    if re.search(r"^\s*(index|name),.*(memory\.total|pcie\.link)", text, re.M | re.I):
        found.append("query-csv")
    if re.search(r"\|\s*NVIDIA-SMI\s", text):
        found.append("smi")
    if "LnkSta:" in text:
        found.append("lspci")
    return found


def parse(text: str, source: str) -> tuple[dict, list, list[str]]:
    """(gpus by index, topo links, kinds found) of one saved text; refuses a text with none."""
    found = kinds(text)
    if not found:
        raise DecodescopeError(f"{source}: no nvidia-smi or lspci output recognised",
                               "save one of: nvidia-smi -q; nvidia-smi topo -m; nvidia-smi; "
                               "nvidia-smi --query-gpu=index,name,memory.total,pcie.link.gen.current,pcie.link.gen.max,"
                               "pcie.link.width.current,pcie.link.width.max --format=csv; lspci -vv")
    gpus, links = {}, []
    for kind in found:
        if kind == "topo":
            g, links = parse_topo(text)
        else:
            g = PARSERS[kind](text)
        merge(gpus, g)
    return gpus, links, found


def merge(into: dict, more: dict) -> None:
    """Fields already known stay; new ones are added (pcie fields one by one)."""
    for i, fields in more.items():
        have = into.setdefault(i, {"index": i})
        for k, v in fields.items():
            if isinstance(v, dict) and isinstance(have.get(k), dict):  # pcie, clocks, power: field by field
                old = have[k]
                have[k] = {f: old[f] if old.get(f) is not None else v.get(f) for f in {**v, **old}}
            elif have.get(k) is None:
                have[k] = v


def parse_topo(text: str) -> tuple[dict, list[tuple[int, int, str]]]:
    """`nvidia-smi topo -m`: NUMA and CPU affinity per GPU row, and (a, b, kind) for each GPU pair."""
    lines = [ANSI.sub("", x) for x in text.splitlines()]
    head = next((x.split() for x in lines if re.match(r"^\s*GPU0\s", x) and "X" not in x.split()), None)
    if head is None:
        return {}, []
    cols = []
    for tok in head:
        if tok == "CPU":
            break
        cols.append(tok)
    gpus, pairs = {}, {}
    for x in lines:
        toks = x.split()
        if not toks or not re.fullmatch(r"GPU\d+", toks[0]) or "X" not in toks[1:len(cols) + 1]:
            continue  # the header line, a legend line, or a row cut short
        i = int(toks[0][3:])
        cells, rest = toks[1:len(cols) + 1], toks[len(cols) + 1:]
        gpus[i] = {"cpu_affinity": rest[0] if rest and rest[0] != "N/A" else None,
                   "numa_node": int(rest[1]) if len(rest) > 1 and rest[1].isdigit() else None}
        for col, kind in zip(cols, cells):
            if re.fullmatch(r"GPU\d+", col) and kind != "X":
                j = int(col[3:])
                pairs[(min(i, j), max(i, j))] = kind
    for col in cols:
        if re.fullmatch(r"GPU\d+", col):
            gpus.setdefault(int(col[3:]), {})
    return gpus, [(a, b, k) for (a, b), k in sorted(pairs.items())]


def parse_query_csv(text: str) -> dict:
    """`nvidia-smi --query-gpu=... --format=csv` (units in the header or the cells)."""
    lines = [x.strip() for x in text.splitlines()]
    start = next(i for i, x in enumerate(lines) if re.match(r"^(index|name),", x, re.I))
    keys = [re.sub(r"\s*\[.*\]", "", k).strip().lower() for k in lines[start].split(",")]
    gpus = {}
    for n, row in enumerate(lines[start + 1:]):
        cells = [c.strip() for c in row.split(",")]
        if len(cells) != len(keys):
            break
        r = dict(zip(keys, cells))
        i = int(r["index"]) if r.get("index", "").isdigit() else n
        gpus[i] = {"name": r.get("name"), "memory_bytes": _mib(r.get("memory.total")),
                   "driver": r.get("driver_version"), "bus_id": r.get("pci.bus_id"),
                   "pcie": _pcie(r.get("pcie.link.gen.current"), r.get("pcie.link.gen.max"),
                                 r.get("pcie.link.width.current"), r.get("pcie.link.width.max")),
                   "clocks_mhz": _pair(r, ("clocks.current.sm", "clocks.sm"), ("clocks.max.sm",)),
                   "power_w": _pair(r, ("power.draw",), ("power.limit",))}
    return gpus


def _pair(r: dict, now: tuple, top: tuple) -> dict | None:
    a = next((_num(r[k]) for k in now if k in r), None)
    b = next((_num(r[k]) for k in top if k in r), None)
    return {"current": a, "max": b} if a is not None or b is not None else None


def parse_smi_q(text: str) -> dict:
    """`nvidia-smi -q`: one block per 'GPU 00000000:xx:00.0' line, fields by their section path."""
    driver = re.search(r"^Driver Version\s*:\s*(\S+)", text, re.M)
    gpus = {}
    for n, block in enumerate(re.split(r"^GPU [0-9A-Fa-f]{4,8}:[0-9A-Fa-f:.]+\s*$", text, flags=re.M)[1:]):
        f = _paths(block)
        gpus[n] = {"name": f.get("Product Name"), "memory_bytes": _mib(f.get("FB Memory Usage/Total")),
                   "driver": driver[1] if driver else None, "bus_id": f.get("PCI/Bus Id"),
                   "pcie": _pcie(f.get("PCI/GPU Link Info/PCIe Generation/Current"),
                                 f.get("PCI/GPU Link Info/PCIe Generation/Max"),
                                 f.get("PCI/GPU Link Info/Link Width/Current"),
                                 f.get("PCI/GPU Link Info/Link Width/Max")),
                   "clocks_mhz": _q_pair(f, "Clocks/SM", "Max Clocks/SM"),
                   "power_w": _q_pair(f, "GPU Power Readings/Power Draw", "GPU Power Readings/Current Power Limit")
                   or _q_pair(f, "Power Readings/Power Draw", "Power Readings/Power Limit")}
    return gpus


def _q_pair(f: dict, now: str, top: str) -> dict | None:
    a, b = _num(f.get(now)), _num(f.get(top))
    return {"current": a, "max": b} if a is not None or b is not None else None


def _paths(block: str) -> dict:
    """'Section/Sub/Key' -> value from an indented `nvidia-smi -q` block (first wins)."""
    out, stack = {}, []
    for line in block.splitlines():
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        while stack and stack[-1][0] >= indent:
            stack.pop()
        key, sep, value = line.strip().partition(":")
        if sep and value.strip():
            out.setdefault("/".join([s for _, s in stack] + [key.strip()]), value.strip())
        else:
            stack.append((indent, key.strip()))
    return out


def parse_smi_table(text: str) -> dict:
    """Plain `nvidia-smi`: index, name and bus id on one row, power and memory on the next."""
    driver = re.search(r"(?:Driver|KMD) Version:\s*(\S+)", text)
    lines = text.splitlines()
    gpus = {}
    for n, line in enumerate(lines):
        m = re.match(r"^\|\s+(\d+)\s+(.+?)\s+(?:On|Off)\s+\|\s+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f:.]+)", line)
        if not m:
            continue
        nxt = lines[n + 1] if n + 1 < len(lines) else ""
        mem = re.search(r"(\d+)MiB\s*/\s*(\d+)MiB", nxt)
        pw = re.search(r"(\d+)W\s*/\s*(\d+)W", nxt)
        gpus[int(m[1])] = {"name": m[2].strip(), "bus_id": m[3], "driver": driver[1] if driver else None,
                           "memory_bytes": int(mem[2]) * MIB if mem else None,
                           "power_w": {"current": float(pw[1]), "max": float(pw[2])} if pw else None}
    return gpus


def parse_lspci(text: str) -> dict:
    """`lspci -vv`: LnkCap (the most the link can do) and LnkSta (what it does now) of each
    NVIDIA display function, in bus order; bridges are skipped."""
    blocks, cur = [], None
    for line in text.splitlines():
        header = re.match(r"^([0-9a-f]{4}:)?[0-9a-f]{2}:[0-9a-f]{2}\.\d\s+(.*)", line, re.I)
        if header or line.startswith("#") or cur is None:
            cur = {"head": header[2] if header else line, "lines": []}
            blocks.append(cur)
        cur["lines"].append(line)
    gpus = {}
    for b in blocks:
        body = "\n".join(b["lines"])
        if "LnkSta:" not in body or not _is_gpu(b["head"]):
            continue
        cap = re.search(r"LnkCap:.*?Speed ([\d.]+)GT/s.*?Width x(\d+)", body)
        sta = re.search(r"LnkSta:.*?Speed ([\d.]+)GT/s[^,]*, Width x(\d+)", body)
        numa = re.search(r"NUMA node:\s*(\d+)", body)
        name = re.search(r"NVIDIA Corporation (.*?)(?: \(rev|$)", b["head"])
        gpus[len(gpus)] = {"name": name[1] if name else None, "numa_node": int(numa[1]) if numa else None,
                           "pcie": _pcie(GT_S.get(sta[1]) if sta else None, GT_S.get(cap[1]) if cap else None,
                                         sta[2] if sta else None, cap[2] if cap else None)}
    return gpus


def _is_gpu(head: str) -> bool:
    h = head.lower()
    if re.match(r"^([0-9a-f]{4}:)?[0-9a-f]{2}:", head, re.I) or "controller" in h:
        return "nvidia" in h and ("vga" in h or "3d controller" in h)
    return not any(w in h for w in ("bridge", "upstream", "root port"))  # a pasted fragment without its header


def _pcie(gen_cur, gen_max, width_cur, width_max) -> dict:
    return {"gen_current": _int(gen_cur), "gen_max": _int(gen_max),
            "width_current": _int(width_cur), "width_max": _int(width_max)}


def _int(v) -> int | None:
    m = re.match(r"\s*(\d+)", str(v)) if v is not None else None
    return int(m[1]) if m else None


def _num(v) -> float | None:
    m = re.match(r"\s*([\d.]+)", str(v)) if v is not None else None
    return float(m[1]) if m else None


def _mib(v) -> int | None:
    n = _num(v)
    return int(n) * MIB if n is not None else None


PARSERS = {"smi-q": parse_smi_q, "query-csv": parse_query_csv, "smi": parse_smi_table, "lspci": parse_lspci}
