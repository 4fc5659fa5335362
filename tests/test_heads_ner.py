"""The head contract (:mod:`heads_contract`) over every registered NER head, and the registry itself."""

from heads_contract import jax_test_for
from heads_contract import lora_fresh_process_test_for
from heads_contract import test_ids_export_gives_the_ids_endpoint  # noqa: F401
from heads_contract import test_lora_folder_loads_back_and_merges  # noqa: F401
from heads_contract import test_save_load_round_trip  # noqa: F401
from heads_contract import test_the_registry_lists_heads_without_model_code_and_names_the_choices  # noqa: F401
from heads_contract import test_training_records_the_head  # noqa: F401
from heads_contract import text_exports_test_for
from heads_contract import trained_fixture

trained = trained_fixture("ner")
test_predict_on_the_jax_backend_gives_what_tensorflow_gives = jax_test_for("ner")
test_lora_folders_answer_predict_in_a_fresh_process = lora_fresh_process_test_for("ner")
test_text_exports_in_a_fresh_process_give_what_predict_gives = text_exports_test_for("ner")
