"""The FGD paper's published results on the shipped openb workloads, shown beside a replay's:
the allocation ratio at 100 % and 130 % arrived, mean and sample standard deviation over seeds
42-51 (the artifact's `analysis_allo_discrete.csv`, hkust-adsl/kubernetes-scheduler-simulator)."""

from typing import NamedTuple

from vgpu.domain.fragmentation import PaperPolicy


class Published(NamedTuple):
    at_100: float
    sd_100: float
    at_130: float
    sd_130: float


_R, _D, _C, _P, _B, _F = (
    PaperPolicy.RANDOM,
    PaperPolicy.DOTPROD,
    PaperPolicy.GPUCLUSTERING,
    PaperPolicy.GPUPACKING,
    PaperPolicy.BESTFIT,
    PaperPolicy.FGD,
)
PUBLISHED: dict[str, dict[PaperPolicy, Published]] = {
    "default": {
        _R: Published(86.30, 0.33, 87.47, 0.32),
        _D: Published(90.62, 0.19, 90.85, 0.20),
        _C: Published(91.65, 0.61, 91.88, 0.62),
        _P: Published(91.78, 0.53, 92.00, 0.54),
        _B: Published(92.86, 0.14, 93.08, 0.13),
        _F: Published(95.23, 0.11, 95.39, 0.08),
    },
    "gpushare100": {
        _R: Published(78.90, 0.15, 79.44, 0.13),
        _D: Published(81.98, 0.30, 82.42, 0.31),
        _C: Published(82.22, 0.51, 82.65, 0.48),
        _P: Published(82.13, 0.50, 82.57, 0.49),
        _B: Published(84.62, 0.22, 85.01, 0.20),
        _F: Published(86.64, 0.16, 86.90, 0.15),
    },
    "gpuspec33": {
        _R: Published(83.87, 0.26, 86.46, 0.13),
        _D: Published(79.82, 0.25, 89.14, 0.38),
        _C: Published(81.09, 0.22, 92.12, 0.68),
        _P: Published(82.22, 0.39, 93.22, 0.63),
        _B: Published(80.39, 0.27, 93.09, 0.15),
        _F: Published(87.84, 0.18, 94.55, 0.14),
    },
    "multigpu50": {
        _R: Published(81.28, 0.83, 90.27, 0.44),
        _D: Published(94.73, 0.20, 94.85, 0.21),
        _C: Published(95.69, 0.28, 95.81, 0.29),
        _P: Published(96.06, 0.31, 96.18, 0.31),
        _B: Published(95.62, 0.18, 95.74, 0.19),
        _F: Published(97.09, 0.11, 97.18, 0.10),
    },
}
