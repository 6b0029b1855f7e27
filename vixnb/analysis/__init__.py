"""Analysis of trained models: where they look, and how different the maps of the mechanisms are.

- ``maps``: attention maps of any model, collected by mixer type (``attention_maps``), what each mechanism's map
  is (``map_kind``), attention rollout, and the measures of maps (row entropy, diagonal prominence, attention
  distance, distance to the exact softmax map).
- ``attribution``: captum's attributions (Integrated Gradients, Occlusion, Grad-CAM) of any family, their
  agreement, and deletion/insertion curves.
- ``records``: the fixed image panel every page uses, and the stored measurements the chapters read.
"""
from .attribution import (TokensToGrid, attribute, attribution_measures, deletion_insertion, gradcam_layer,
                          rank_agreement)
from .maps import (approximation_errors, attention_distance, attention_maps, attention_rollout,
                   centre_query, class_token_map, collect_attention_maps, diagonal_prominence, exact_softmax_map,
                   has_attention_map, has_skip, map_distance, map_kind, nystrom_map, performer_map,
                   randomisation_check, rollout, row_entropy)
from .records import (attention_record, model_maps, panel, panel_images, record_stale, study_runs, study, study_map_kinds, study_record,
                      study_record_name, study_settings)

__all__ = ["TokensToGrid", "attribute", "attribution_measures", "deletion_insertion", "gradcam_layer", "rank_agreement",
           "approximation_errors", "attention_distance", "attention_maps", "attention_record",
           "attention_rollout", "centre_query", "class_token_map", "collect_attention_maps", "diagonal_prominence",
           "exact_softmax_map", "has_attention_map", "has_skip", "map_distance", "map_kind", "model_maps",
           "nystrom_map", "panel", "performer_map", "randomisation_check", "record_stale", "rollout", "row_entropy",
           "study", "study_map_kinds", "study_runs", "panel_images", "study_record", "study_record_name", "study_settings"]
