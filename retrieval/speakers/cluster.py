"""Grouping speaker vectors by voice, in NumPy: average-linkage agglomerative clustering
on cosine distance (the nearest-neighbour chain, O(n²) time and memory), cut at the count
the user gave, or at the count from 2 to ``MAX_SPEAKERS`` with the best silhouette, unless
even the two farthest groups sound alike (then one speaker)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

MAX_SPEAKERS = 8
# Two groups whose average cosine distance is below this are one voice: one flite or
# espeak voice's stretches join below 0.41, two voices' groups stay apart above 0.48
# (bench/diarize.py); people's real voices are farther apart than synthetic ones.
ONE_VOICE_DISTANCE = 0.45
MIN_SILHOUETTE = 0.1  # a best silhouette below this is no structure: one speaker
MIN_SHARE = 0.05  # a cluster with fewer of the stretches is strays, not a speaker
MAX_STRAYS = 6  # clusters of strays looked past when cutting for a count

Labels = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Merge:
    """Two clusters joined at ``height`` (average cosine distance)."""

    a: int
    b: int
    height: float


def cosine_distances(vectors: npt.NDArray[np.float32]) -> npt.NDArray[np.float64]:
    """1 - cosine similarity between every pair of (unit) rows."""
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    sims = unit.astype(np.float64) @ unit.T.astype(np.float64)
    out: npt.NDArray[np.float64] = np.clip(1.0 - sims, 0.0, 2.0)
    np.fill_diagonal(out, 0.0)
    return out


def average_linkage(distances: npt.NDArray[np.float64]) -> list[Merge]:
    """The merges of average-linkage clustering, lowest first (nearest-neighbour chain;
    cluster ``i`` keeps the id of its first member, so ids stay below n)."""
    n = len(distances)
    d = distances.copy()
    np.fill_diagonal(d, np.inf)
    size = np.ones(n)
    active = np.ones(n, dtype=bool)
    merges: list[Merge] = []
    chain: list[int] = []
    while len(merges) < n - 1:
        if not chain:
            chain.append(int(np.flatnonzero(active)[0]))
        a = chain[-1]
        row = np.where(active, d[a], np.inf)
        row[a] = np.inf
        b = int(np.argmin(row))
        if len(chain) > 1 and row[chain[-2]] <= row[b]:
            b = chain[-2]  # ties go back down the chain, so it always ends
        if len(chain) > 1 and b == chain[-2]:
            chain.pop()
            chain.pop()
            height = float(d[a, b])
            keep, gone = min(a, b), max(a, b)
            merged = (size[a] * d[a] + size[b] * d[b]) / (size[a] + size[b])
            d[keep], d[:, keep] = merged, merged
            d[keep, keep] = np.inf
            d[gone], d[:, gone] = np.inf, np.inf
            size[keep] += size[gone]
            active[gone] = False
            merges.append(Merge(keep, gone, height))
        else:
            chain.append(b)
    merges.sort(key=lambda m: m.height)
    return merges


def cut(merges: list[Merge], n: int, k: int) -> Labels:
    """Cluster ids 0..k-1 (by first member) after all but the last ``k - 1`` merges."""
    parent = list(range(n))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for m in merges[: max(0, n - k)]:
        ra, rb = root(m.a), root(m.b)
        parent[max(ra, rb)] = min(ra, rb)
    roots = [root(i) for i in range(n)]
    ids = {r: i for i, r in enumerate(dict.fromkeys(roots))}
    return np.array([ids[r] for r in roots], dtype=np.int64)


def silhouette(distances: npt.NDArray[np.float64], labels: Labels) -> float:
    """The mean silhouette of a clustering (a lone member scores 0)."""
    k = int(labels.max()) + 1
    if k < 2:
        return 0.0
    onehot = np.zeros((len(labels), k))
    onehot[np.arange(len(labels)), labels] = 1.0
    counts = onehot.sum(axis=0)
    sums = distances @ onehot  # each point's total distance to each cluster
    own = counts[labels]
    a = sums[np.arange(len(labels)), labels] / np.maximum(own - 1, 1)
    mean = sums / np.maximum(counts, 1)
    mean[np.arange(len(labels)), labels] = np.inf
    b = mean.min(axis=1)
    s = np.where(own > 1, (b - a) / np.maximum(np.maximum(a, b), 1e-12), 0.0)
    return float(s.mean())


def absorb(distances: npt.NDArray[np.float64], labels: Labels, keep: int | None = None) -> Labels:
    """Clusters too small to be a voice (under ``MIN_SHARE`` of the stretches, or one
    stretch) folded into the nearest of the others, by average distance; ``keep``: at
    most that many clusters stay, the largest. Ids renumbered by first member."""
    counts = np.bincount(labels)
    least = max(2, int(np.ceil(MIN_SHARE * len(labels))))
    big = [c for c in np.argsort(-counts, kind="stable") if counts[c] >= least]
    if keep is not None:
        big = big[:keep]
    if not big:
        return np.zeros(len(labels), dtype=np.int64)
    onehot = np.zeros((len(labels), len(big)))
    for j, c in enumerate(big):
        onehot[labels == c, j] = 1.0
    mean = (distances @ onehot) / np.maximum(onehot.sum(axis=0), 1)
    nearest = np.array(big)[np.argmin(mean, axis=1)]
    out = np.where(np.isin(labels, big), labels, nearest)
    ids = {c: i for i, c in enumerate(dict.fromkeys(out.tolist()))}
    return np.array([ids[c] for c in out.tolist()], dtype=np.int64)


def cluster(vectors: npt.NDArray[np.float32], speakers: int | None = None) -> Labels:
    """A cluster id per vector: ``speakers`` clusters when given, else the count in
    2..``MAX_SPEAKERS`` with the best silhouette, or one when the voices are alike.
    A few stray stretches never count as a speaker (``absorb``)."""
    n = len(vectors)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if n == 1 or speakers == 1:
        return np.zeros(n, dtype=np.int64)
    distances = cosine_distances(vectors)
    merges = average_linkage(distances)
    if speakers is not None:
        # Cut lower until ``speakers`` clusters are big enough to be voices.
        labels = cut(merges, n, min(speakers, n))
        for k in range(min(speakers, n), min(n, speakers + MAX_STRAYS) + 1):
            labels = cut(merges, n, k)
            if sum(np.bincount(labels) >= max(2, np.ceil(MIN_SHARE * n))) >= speakers:
                break
        return absorb(distances, labels, keep=speakers)
    if merges[-1].height < ONE_VOICE_DISTANCE:
        return np.zeros(n, dtype=np.int64)
    best, best_score = np.zeros(n, dtype=np.int64), MIN_SILHOUETTE
    for k in range(2, min(MAX_SPEAKERS + MAX_STRAYS, n - 1) + 1):
        labels = absorb(distances, cut(merges, n, k))
        if int(labels.max()) + 1 > MAX_SPEAKERS:
            break
        score = silhouette(distances, labels)
        if score > best_score:
            best, best_score = labels, score
    return best
