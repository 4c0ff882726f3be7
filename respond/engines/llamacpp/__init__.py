"""The embedded engine: llama.cpp in this process, through llama-cpp-python."""

from respond.engines.llamacpp._engine import BUNDLED_ALIAS, LlamaCppEngine, bundled_model_path
from respond.engines.llamacpp._on_demand import OnDemandEngine

__all__ = ["BUNDLED_ALIAS", "LlamaCppEngine", "OnDemandEngine", "bundled_model_path"]
