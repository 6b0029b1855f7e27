"""Analysis of trained models: where they look, and how different the maps of the mechanisms are.

- ``maps``: attention maps of any model, collected by mixer type (``attention_maps``), what each mechanism's map
  is (``map_kind``), attention rollout, and the measures of maps (row entropy, diagonal prominence, attention
  distance, distance to the exact softmax map).
- ``attribution``: captum's attributions (Integrated Gradients, Occlusion, Grad-CAM) of any family, their
  agreement, and deletion/insertion curves.
- ``records``: the fixed image panel every page uses, and the stored measurements the chapters read.
"""
from .maps import (attention_rollout, class_token_map, collect_attention_maps, diagonal_prominence,
                   has_attention_map)
from .records import (attention_record, model_maps, panel, record_stale, study, study_map_kinds, study_record,
                      study_record_name, study_settings)

__all__ = ["attention_rollout", "attention_record", "class_token_map", "collect_attention_maps",
           "diagonal_prominence", "has_attention_map", "model_maps", "panel", "record_stale", "study", "study_map_kinds",
           "study_record", "study_record_name", "study_settings"]
