"""Analysis of trained models: where they look, and how different the maps of the mechanisms are.

- ``maps``: attention maps of any model, collected by mixer type (``attention_maps``), and what each mechanism's map
  is (``map_description``, from the ``map_description`` every mixer declares).
- ``map_measures``: attention rollout and the measures of maps (row entropy, diagonal prominence, attention
  distance, the class token's entropy over the patches).
- ``approximations``: the exact softmax map of a mixer's queries and keys, the Performer's and Nystromformer's maps
  from given ones, and their distance to it.
- ``sanity_checks``: the model-randomisation check of a map.
- ``attribution``: captum's attributions (Integrated Gradients, Occlusion, Grad-CAM) of any family, their
  agreement, and deletion/insertion curves.
- ``records``: the fixed image panel every page uses, and the stored measurements the chapters read.
"""
from .approximations import approximation_errors, exact_softmax_map, map_distance, nystrom_map, performer_map
from .attribution import (TokensToGrid, attribute, attribution_measures, deletion_insertion, gradcam_layer,
                          rank_agreement)
from .map_measures import (attention_distance, attention_rollout, centre_query, class_token_entropy, class_token_map,
                           diagonal_prominence, rollout, row_entropy)
from .maps import attention_maps, collect_attention_maps, has_skip, map_description
from .records import (attention_record, maps_record_stale, model_maps, panel, panel_images, panel_labels,
                      prediction_record, record_stale, study_runs, study_maps, study_record, study_record_name,
                      study_settings)
from ..runs.asked import study
from .sanity_checks import randomisation_check

__all__ = ["TokensToGrid", "attribute", "attribution_measures", "deletion_insertion", "gradcam_layer", "rank_agreement",
           "approximation_errors", "attention_distance", "attention_maps", "attention_record",
           "attention_rollout", "centre_query", "class_token_entropy", "class_token_map", "collect_attention_maps",
           "diagonal_prominence",
           "exact_softmax_map", "has_skip", "map_distance", "map_description", "model_maps",
           "maps_record_stale", "nystrom_map", "panel", "performer_map", "prediction_record", "randomisation_check",
           "record_stale",
           "rollout", "row_entropy",
           "study", "study_maps", "study_runs", "panel_images", "panel_labels", "study_record", "study_record_name",
           "study_settings"]
