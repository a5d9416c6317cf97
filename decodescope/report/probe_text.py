"""Terminal text of `decodescope probe`: the numbers of Probe.to_dict(), with units."""


def _gen(p: dict) -> str:
    def part(now, top, fmt):
        if now is None and top is None:
            return "?"
        return fmt(now) if now == top or top is None else f"{fmt(now)} of {fmt(top)}"
    return f"PCIe {part(p['gen_current'], p['gen_max'], lambda g: f'Gen{g}')} " \
           f"{part(p['width_current'], p['width_max'], lambda w: f'x{w}')}"


def _state(p: dict) -> str:
    if p["under_load"]:
        return {"idle downshift": "idle downshift: back to full speed under load",
                "degraded link": "DEGRADED: still below its maximum under load (slot, riser, BIOS setting)",
                "full": "full speed"}[p["under_load"]]
    if p["downgraded"]:
        return "below its maximum now: idle downshift or degraded? run `decodescope probe --load`"
    return ""


def probe_text(probe) -> str:
    d = probe.to_dict()
    lines = []
    if d["cpu"] is not None:
        lines.append(f"host: {d['cpu']}, {d['host_memory_bytes'] / 1e9:.1f} GB memory")
    if not d["gpus"]:
        lines.append("no NVIDIA GPU found on this machine" if d["cpu"] is not None else "no GPU in these files")
    for g in d["gpus"]:
        mem = f"{g['memory_bytes'] / 2**30:.1f} GiB" if g["memory_bytes"] else "memory ?"
        where = f"NUMA {g['numa_node']}" if g["numa_node"] is not None else "NUMA ?"
        cpus = f", CPUs {g['cpu_affinity']}" if g["cpu_affinity"] else ""
        extra = [f"driver {g['driver']}"] if g["driver"] else []
        if g["clocks_mhz"] and g["clocks_mhz"]["current"] is not None:
            extra.append(f"SM {g['clocks_mhz']['current']:.0f} of {g['clocks_mhz']['max'] or 0:.0f} MHz")
        if g["power_w"] and g["power_w"]["current"] is not None:
            extra.append(f"{g['power_w']['current']:.0f} of {g['power_w']['max'] or 0:.0f} W")
        lines.append(f"GPU{g['index']}  {g['name'] or '?'}  {mem}  {_gen(g['pcie'])}  {where}{cpus}"
                     + (f"  ({', '.join(extra)})" if extra else ""))
        if state := _state(g["pcie"]):
            lines.append(f"      {state}")
    if d["links"]:
        lines.append("links between GPUs (nvidia-smi topo -m -> decodescope model --link):")
        by = {}
        for x in d["links"]:
            by.setdefault((x["kind"], x["link"]), []).append(f"{x['a']}-{x['b']}")
        for (kind, link), pairs in by.items():
            lines.append(f"  {kind:5s} -> --link {link:12s} GPU pairs {' '.join(pairs)}")
    lines += [f"note: {n}" for n in d["notes"]]
    lines.append(f"read from: {', '.join(d['sources'])}")
    return "\n".join(lines)
