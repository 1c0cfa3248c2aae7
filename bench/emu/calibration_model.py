"""The emulator's calibrated time estimate for a call, from its launches' counts, under a set of constants.

Mirrored in C++ by ptxemu::estimatedSeconds (runtime/ptxemu/Profile.cpp); the unit test
PtxEmuCalibration.MatchesTheFit checks that the two agree on every cell of bench/emu/calibration.json.

Per launch, three times (in seconds):
  memory   its 32-byte sectors at the model's bandwidth (GpuModel: 4.3e12 B/s), a stored sector counting
           `store_weight` loaded ones, all over `efficiency`;
  issue    its warp instructions over the GPU's issue rate: per SM, 4 a cycle, or `issue_per_warp` for each
           resident warp where that is less (with few warps per scheduler, each waits on its own results);
  latency  the cycles from the launch's first block to its last one's end, its blocks handed in grid order
           to the SMs' free block slots, each taking its slowest warp's cycles on the latency timeline
           (ptxemu::makespanCycles), x `latency_scale`.
The launch takes their `norm`-norm (1: their sum, nothing overlaps; 2: the root sum of squares; large:
their maximum, everything overlaps). A call's launches run one after another. The estimate is the share of
copy bandwidth that time leaves: (minimum bytes / bandwidth) / time.

The uncalibrated bound (ptxemu::bound, before this model) differs in its latency: the warps' cycles over
the warps that run at once, an average that sees neither the last wave nor blocks longer than the rest.
"""
import math

SMS, ISSUE_PER_SM, CLOCK, BANDWIDTH, WARP = 132, 4, 1.98e9, 4.3e12, 32

DESCRIPTION = __doc__.strip()
NAMES = ["efficiency", "store_weight", "issue_per_warp", "latency_scale", "norm"]
START = {"efficiency": 1.0, "store_weight": 1.2, "issue_per_warp": 0.3, "latency_scale": 1.0, "norm": 2.0}


def concurrent_warps(launch):
    warps_per_block = max(1, (launch["block"][0] * launch["block"][1] * launch["block"][2] + WARP - 1) // WARP)
    return min(launch["blocks"] * warps_per_block, SMS * launch["warps_per_sm"])


def norm(terms, p):
    biggest = max(terms)
    if biggest <= 0:
        return 0.0
    return biggest * sum((t / biggest) ** p for t in terms) ** (1 / p)  # scaled: a large norm cannot overflow


def launch_seconds(launch, params):
    memory = 32 * (launch["load_sectors"] + params["store_weight"] * launch["store_sectors"]) / (
        params["efficiency"] * BANDWIDTH)
    rate = min(ISSUE_PER_SM, launch["warps_per_sm"] * params["issue_per_warp"])
    issue = launch["warp_instructions"] / (SMS * rate * CLOCK)
    latency = params["latency_scale"] * launch["makespan_cycles"] / CLOCK
    return norm([memory, issue, latency], params["norm"])


def uncalibrated_seconds(launch):
    memory = 32 * (launch["load_sectors"] + launch["store_sectors"]) / BANDWIDTH
    issue = launch["warp_instructions"] / (SMS * ISSUE_PER_SM * CLOCK)
    concurrent = concurrent_warps(launch)
    latency = launch["warp_cycles"] / concurrent / CLOCK if concurrent > 0 else 0.0
    return norm([memory, issue, latency], 2)


def fraction_of_copy(line, params=None):
    """The estimate under `params`; the uncalibrated bound's where `params` is None."""
    seconds = sum(launch_seconds(l, params) if params else uncalibrated_seconds(l) for l in line["launches"])
    return (line["bytes"] / BANDWIDTH) / seconds if seconds > 0 else 0.0


def to_logs(params):
    """The search's coordinates: every constant's log (the norm's excess over 1: a norm stays >= 1)."""
    return [math.log(max(params[n] - (1 if n == "norm" else 0), 1e-3)) for n in NAMES]


def from_logs(logs):
    return {n: math.exp(x) + (1 if n == "norm" else 0) for n, x in zip(NAMES, logs)}


def rounded(params):
    return {n: float(f"{v:.4g}") for n, v in params.items()}


def camel(name):
    return "".join(part.capitalize() for part in name.split("_"))
