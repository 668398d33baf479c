"""Write the zoo's generator templates from data the package ships (run once; output committed).

- gavel3, gavel3-idle: K80, P100 and V100 nodes of 4 GPUs; power from the GPU catalogue
  (src/andreas/data/catalogue/gpus.yaml: host share halved for a 4-GPU node, busy and idle
  draw per GPU, so the tables are linear); seven Gavel models (profiles.csv of the catalogue,
  Gavel's measured throughputs, MIT) at 1, 2 and 4 GPUs. gavel3-idle keeps idle nodes powered
  (host + 4 idle GPUs), the others switch them off.
- gavel3-heavytail: gavel3 with heavy-tailed job lengths: each Gavel model in ten classes whose
  epochs are its gavel3 epochs x 0.25 (1 - u)^(-1/0.8) at u = 0.05, 0.15, ..., 0.95 (Pareto
  quantiles, shape 0.8: 0.27x to 10.5x), for the second hold-out (issue 42).
- gavel3-gangs: gavel3 plus three of its models as gangs of 2 nodes x 4 GPUs (each epoch
  2 x e2 times as fast as on one node, e2 the median 2-node efficiency Sia measured on 8-GPU
  Ethernet nodes: src/andreas/data/catalogue/gang_scaling.csv) in job classes twice as
  long, beside the seven one-node classes (issue 43).
- concave3: the paper's profiles on three node types with concave and linear power tables:
  FAST (the paper's TESLA times, a concave table), MID (TESLA times x 1.35, linear), SLOW (the
  paper's TURING times). Synthetic power: a cluster unlike the paper's, not a measured one.
- paper-tariff: the paper's scenario under a week of hourly wholesale prices (DE-LU, July
  2023, from ../shared/data/public/price_DE-LU_2023_hourly_usd_mwh.csv, x 0.92 EUR/USD).
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import yaml

from andreas.catalogue import gpu_catalogue
from andreas.sim.traces import two_node_efficiency

HERE = Path(__file__).parent / "templates"
ROOT = Path(__file__).resolve().parents[2]
PAPER = ROOT / "src" / "andreas" / "data" / "paper"
CATALOGUE = ROOT / "src" / "andreas" / "data" / "catalogue" / "profiles.csv"
GAVEL_CLASSES = [  # model, epochs (1000 steps): fastest run 1.1-1.6 h
    ("ResNet-50 (batch size 64)", 60), ("Transformer (batch size 64)", 100),
    ("LM (batch size 80)", 300), ("ResNet-18 (batch size 128)", 300), ("A3C", 30),
    ("CycleGAN", 20), ("Recommendation (batch size 4096)", 40)]


def write(name: str, header: str, template: dict, profiles: list[list], classes: list[list]):
    """A template folder; a profile row of five values gives its nodes (a gang)."""
    d = HERE / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "template.yaml").write_text(header + yaml.safe_dump(template, sort_keys=False))
    ganged = any(len(r) == 5 for r in profiles)
    with (d / "profiles.csv").open("w", newline="") as f:
        csv.writer(f).writerows([["profile", "gpu_type", "gpus", "seconds_per_epoch"]
                                 + (["nodes"] if ganged else [])]
                                + [r + [""] * (ganged and len(r) == 4) for r in profiles])
    with (d / "job_classes.csv").open("w", newline="") as f:
        csv.writer(f).writerows([["job_class", "profile", "epochs"]] + classes)


def gavel() -> None:
    cat = gpu_catalogue()
    types, idle_types = {}, {}
    for t in ("K80", "P100", "V100"):
        spec = cat[t]
        host = spec.host_w / 2
        table = [round(host + b * spec.busy_w + (4 - b) * spec.idle_w, 1) for b in range(1, 5)]
        types[t] = {"node_power_w": table}
        idle_types[t] = {"node_power_w": table, "idle_power_w": round(host + 4 * spec.idle_w, 1)}
    models = {m for m, _ in GAVEL_CLASSES}
    rows = [[r["profile"], r["gpu_type"], int(r["gpus"]), round(float(r["seconds_per_epoch"]), 3)]
            for r in csv.DictReader(CATALOGUE.open())
            if r["profile"] in models and int(r["gpus"]) <= 4 and not r.get("power_limit_w")]
    classes = [[f"G{i + 1}", m, e] for i, (m, e) in enumerate(GAVEL_CLASSES)]
    header = ("# Written by bench/zoo/make_templates.py: catalogue power (gpus.yaml) for 4-GPU\n"
              "# nodes, Gavel's measured throughputs (MIT).\n")
    base = {"energy_price": 0.17168313, "pue": 1.33, "restart_overhead_s": 0}
    write("gavel3", header, {**base, "gpu_types": types}, rows, classes)
    write("gavel3-idle", header + "# Idle nodes stay powered: host + 4 idle GPUs.\n",
          {**base, "gpu_types": idle_types}, rows, classes)
    tails = [round(0.25 * (1.0 - (i + 0.5) / 10.0) ** (-1.0 / 0.8), 3) for i in range(10)]
    heavy = [[f"G{i + 1}-{k}", m, round(e * t, 1)] for i, (m, e) in enumerate(GAVEL_CLASSES)
             for k, t in enumerate(tails)]
    write("gavel3-heavytail", header + "# Heavy-tailed lengths: each model's epochs x Pareto "
          "quantiles (shape 0.8).\n", {**base, "gpu_types": types}, rows, heavy)
    e2 = two_node_efficiency()
    gang_models = GAVEL_CLASSES[:3]
    gangs = [[f"{r[0]} x2", r[1], 4, round(r[3] / (2 * e2), 3), 2] for r in rows
             if r[2] == 4 and r[0] in {m for m, _ in gang_models}]
    gang_classes = [[f"GG{i + 1}", f"{m} x2", 2 * e] for i, (m, e) in enumerate(gang_models)]
    write("gavel3-gangs", header + f"# Three models also as gangs of 2 nodes x 4 GPUs, 2 x "
          f"{e2:.4f} (Sia's 2-node efficiency) as fast as one node.\n",
          {**base, "gpu_types": types}, rows + gangs, classes + gang_classes)


def concave() -> None:
    rows = list(csv.DictReader((PAPER / "profiles.csv").open()))
    out = []
    for r in rows:
        spe = float(r["seconds_per_epoch"])
        if r["gpu_type"] == "TESLA":
            out.append([r["profile"], "FAST", r["gpus"], spe])
            out.append([r["profile"], "MID", r["gpus"], round(spe * 1.35, 4)])
        else:
            out.append([r["profile"], "SLOW", r["gpus"], spe])
    classes = [[r["job_class"], r["profile"], r["epochs"]]
               for r in csv.DictReader((PAPER / "job_classes.csv").open())]
    template = {"energy_price": 0.17168313, "pue": 1.33, "restart_overhead_s": 0,
                "gpu_types": {"FAST": {"node_power_w": [620, 900, 1080, 1180]},
                              "MID": {"node_power_w": [450, 640, 830, 1020]},
                              "SLOW": {"node_power_w": [400, 470]}}}
    write("concave3", "# Written by bench/zoo/make_templates.py: synthetic power tables "
          "(FAST concave), the paper's profiles.\n", template, out, classes)


def tariff(prices_csv: Path) -> None:
    rows = list(csv.reader(prices_csv.open()))[1:]
    start = next(i for i, r in enumerate(rows) if r[0].startswith("2023-07-10 00:00"))
    week = [round(float(r[2]) * 0.92 / 1000.0, 5) for r in rows[start:start + 7 * 24]]
    template = yaml.safe_load((PAPER / "template.yaml").read_text())
    template["energy_price"] = {"eur_per_kwh": week, "step_s": 3600}
    profiles = [list(r.values()) for r in csv.DictReader((PAPER / "profiles.csv").open())]
    classes = [list(r.values()) for r in csv.DictReader((PAPER / "job_classes.csv").open())]
    write("paper-tariff", "# Written by bench/zoo/make_templates.py: the paper's cluster under "
          "DE-LU wholesale prices, 2023-07-10 to 16 (x 0.92 EUR/USD).\n", template, profiles,
          classes)


if __name__ == "__main__":
    gavel()
    concave()
    tariff(Path(sys.argv[1]) if len(sys.argv) > 1 else
           ROOT.parent / "shared" / "data" / "public" / "price_DE-LU_2023_hourly_usd_mwh.csv")
