"""multidraft.vllm's options: what a user passes, checked without vLLM.

Runs in an environment without vLLM: :func:`multidraft.vllm.options` first checks the installed
vLLM's version, so the tests of everything after that check replace the version lookup.
"""
import re

import numpy as np
import pytest

import multidraft as md
import multidraft.vllm
from multidraft.rdk import AffinityMatrix, VocabularyMap
from multidraft.vllm import _options
from multidraft.vllm._options import (CHAIN_VERIFIERS, KEY, SUPPORTED_VLLM, Options, check_version, fit,
                                      from_additional_config, supported)


@pytest.fixture
def tested_vllm(monkeypatch):
    """Pretend the tested vLLM minor version is installed."""
    monkeypatch.setattr(_options, "vllm_version", lambda: f"{SUPPORTED_VLLM}.0")


@pytest.fixture
def files(tmp_path):
    """Saved files: a vocabulary map (drafter 4 tokens, target 6), an affinity matrix over 6
    tokens, a text file and a .npz archive of other arrays."""
    vocabulary = VocabularyMap(np.array([0, 2, -1, 5]), 6)
    affinity = AffinityMatrix.from_dense(np.full((6, 6), 1 / 6))
    paths = {"vocabulary_map": tmp_path / "map.npz", "affinity": tmp_path / "affinity.npz",
             "text": tmp_path / "notes.txt", "other": tmp_path / "other.npz"}
    vocabulary.save(paths["vocabulary_map"])
    affinity.save(paths["affinity"])
    paths["text"].write_text("not a saved map\n")
    np.savez(paths["other"], a=np.arange(3))
    return {name: str(path) for name, path in paths.items()}


# ----------------------------------------------------------------------------- vLLM version

def test_supported_versions():
    assert SUPPORTED_VLLM == "0.32"
    for version in ("0.32.0", "0.32.5", "0.32", "0.32.1+cpu", "0.32.0rc1"):
        assert supported(version), version
    for version in (None, "0.31.9", "0.33.0", "1.32.0", "0.320.0", "0.3.2", "0"):
        assert not supported(version), version


def test_check_version_refusals():
    check_version("0.32.0")
    check_version("0.32.2+cpu")
    with pytest.raises(ValueError, match=re.escape("multidraft.vllm needs vLLM: pip install 'multidraft[vllm]'")):
        check_version(None)
    with pytest.raises(ValueError, match=r"tested with vLLM 0\.32\.x .*found vLLM 0\.31\.1\. Install vllm==0\.32\.\*"):
        check_version("0.31.1")
    with pytest.raises(ValueError, match=r"found vLLM 0\.33\.0\+cpu"):
        check_version("0.33.0+cpu")


@pytest.mark.skipif(_options.vllm_version() is not None, reason="vLLM is installed here")
def test_options_without_vllm_is_refused():
    with pytest.raises(ValueError, match=re.escape("multidraft.vllm needs vLLM")):
        multidraft.vllm.options()


def test_options_checks_the_version_first(monkeypatch):
    monkeypatch.setattr(_options, "vllm_version", lambda: "0.31.0")
    with pytest.raises(ValueError, match=r"tested with vLLM 0\.32\.x .*found vLLM 0\.31\.0"):
        multidraft.vllm.options(verifier="sps")
    with pytest.raises(ValueError, match=r"found vLLM 0\.31\.0"):  # before the verifier's own refusal
        multidraft.vllm.options(verifier="topk")
    monkeypatch.setattr(_options, "vllm_version", lambda: None)
    with pytest.raises(ValueError, match="needs vLLM"):
        multidraft.vllm.options()


def test_register_installs_nothing_without_the_tested_vllm(monkeypatch):
    """register() never raises: without the tested vLLM it returns before importing vLLM."""
    for version in (None, "0.31.0"):
        monkeypatch.setattr(_options, "vllm_version", lambda version=version: version)
        assert multidraft.vllm.register() is None


# ----------------------------------------------------------------------------- options()

def test_options_defaults_and_every_chain_verifier(tested_vllm):
    assert multidraft.vllm.options() == {KEY: {"verifier": "sps"}}
    assert KEY == "multidraft"
    for name in CHAIN_VERIFIERS:
        assert multidraft.vllm.options(name) == {"multidraft": {"verifier": name}}
    assert multidraft.vllm.options("vllm") == {"multidraft": {"verifier": "vllm"}}


@pytest.mark.parametrize("name", ["topk", "spechub", "bogus", "SPS"])
def test_verifiers_that_cannot_verify_chains_are_refused(tested_vllm, name):
    message = rf"verifier '{name}' cannot verify vLLM's draft chains .*use one of \['sps', "
    with pytest.raises(ValueError, match=message):
        multidraft.vllm.options(name)
    with pytest.raises(ValueError, match=message):
        Options.parse({"verifier": name})
    with pytest.raises(ValueError, match=message):
        Options(verifier=name).check()


def test_verifier_options_reach_md_verifier(tested_vllm):
    config = multidraft.vllm.options("global_resolution", verifier_options={"tau": 1e-4})
    assert config == {"multidraft": {"verifier": "global_resolution", "verifier_options": {"tau": 1e-4}}}
    options = from_additional_config(config)
    verifier = options.chain_verifier()
    assert verifier.tau == 1e-4
    assert md.verifier("global_resolution").tau != 1e-4  # the option changed something
    assert type(verifier) is type(md.verifier("global_resolution"))
    assert Options(verifier="vllm").chain_verifier() is None
    assert type(Options().chain_verifier()) is type(md.verifier("sps"))


def test_verifier_options_refused_by_md_verifier(tested_vllm):
    with pytest.raises(ValueError, match=r"'tau' must be in \(0, 1\), got -1"):
        multidraft.vllm.options("global_resolution", verifier_options={"tau": -1})
    with pytest.raises(ValueError, match=r"verifier 'global_resolution': .*unexpected keyword argument 'bogus'"):
        multidraft.vllm.options("global_resolution", verifier_options={"bogus": 1})
    with pytest.raises(ValueError, match=r"verifier 'sps': .*takes no arguments"):
        Options.parse({"verifier": "sps", "verifier_options": {"tau": 1e-3}})


def test_verifier_options_with_vllms_sampler_are_refused(tested_vllm):
    message = re.escape("'verifier_options' apply to a multidraft verifier, not to vLLM's own sampler")
    with pytest.raises(ValueError, match=message):
        multidraft.vllm.options("vllm", verifier_options={"tau": 1e-3})
    with pytest.raises(ValueError, match=message):
        Options.parse({"verifier": "vllm", "verifier_options": {"tau": 1e-3}})
    assert Options.parse({"verifier": "vllm", "verifier_options": {}}).entry() == {"verifier": "vllm"}


@pytest.mark.parametrize("value", ["tau=1e-3", 5, [["tau", 1e-3]]])
def test_verifier_options_that_are_not_a_dict_are_refused(value):
    with pytest.raises(ValueError, match=r"option 'verifier_options' must be a dict of md\.verifier keywords, got "):
        Options.parse({"verifier": "global_resolution", "verifier_options": value})


# ----------------------------------------------------------------------------- files

def test_files_are_loaded_and_checked(tested_vllm, files):
    config = multidraft.vllm.options("otlp", vocabulary_map=files["vocabulary_map"], affinity=files["affinity"])
    assert config == {"multidraft": {"verifier": "otlp", "vocabulary_map": files["vocabulary_map"],
                                     "affinity": files["affinity"]}}
    options = from_additional_config(config)
    vocabulary, affinity = options.load_vocabulary_map(), options.load_affinity()
    np.testing.assert_array_equal(vocabulary.draft_to_target, [0, 2, -1, 5])
    assert (vocabulary.draft_size, vocabulary.target_size) == (4, 6)
    assert affinity.V == 6
    fit(vocabulary, affinity, 4, 6)
    fit(None, None, 1, 1)
    assert Options().load_vocabulary_map() is None and Options().load_affinity() is None


def test_path_objects_are_written_as_strings(tested_vllm, files, tmp_path):
    config = multidraft.vllm.options(vocabulary_map=tmp_path / "map.npz")
    assert config == {"multidraft": {"verifier": "sps", "vocabulary_map": files["vocabulary_map"]}}


@pytest.mark.parametrize("name", ["vocabulary_map", "affinity"])
def test_missing_files_are_refused(tested_vllm, tmp_path, name):
    missing = str(tmp_path / "absent.npz")
    message = rf"option '{name}' must be the path of a saved file, got '{re.escape(missing)}'"
    with pytest.raises(ValueError, match=message):
        multidraft.vllm.options(**{name: missing})
    with pytest.raises(ValueError, match=message):
        Options.parse({name: missing})
    with pytest.raises(ValueError, match=rf"option '{name}' must be the path of a saved file, got '{re.escape(str(tmp_path))}'"):
        Options.parse({name: str(tmp_path)})  # a directory
    with pytest.raises(ValueError, match=rf"option '{name}' must be the path of a saved file, got 3"):
        Options.parse({name: 3})


def test_files_of_the_wrong_kind_are_refused(tested_vllm, files):
    with pytest.raises(ValueError, match=r"map\.npz is not a saved AffinityMatrix: it holds \['draft_to_target', "):
        multidraft.vllm.options(affinity=files["vocabulary_map"])
    with pytest.raises(ValueError, match=r"affinity\.npz is not a saved VocabularyMap: it holds \['indices', "):
        Options.parse({"vocabulary_map": files["affinity"]})
    for option, kind in (("vocabulary_map", "VocabularyMap"), ("affinity", "AffinityMatrix")):
        with pytest.raises(ValueError, match=rf"notes\.txt is not a saved {kind}: not a NumPy \.npz archive"):
            multidraft.vllm.options(**{option: files["text"]})
        with pytest.raises(ValueError, match=rf"other\.npz is not a saved {kind}: it holds \['a'\]"):
            Options.parse({option: files["other"]})


def test_files_with_vllms_sampler_are_refused(tested_vllm, files):
    message = "a vocabulary map or affinity matrix needs a multidraft verifier: vLLM's own sampler"
    for name in ("vocabulary_map", "affinity"):
        with pytest.raises(ValueError, match=message):
            multidraft.vllm.options("vllm", **{name: files[name]})
        with pytest.raises(ValueError, match=message):
            Options.parse({"verifier": "vllm", name: files[name]})


def test_fit_refusals(files):
    vocabulary = VocabularyMap.load(files["vocabulary_map"])
    affinity = AffinityMatrix.load(files["affinity"])
    message = (r"vocabulary map is for a drafter of 4 tokens and a target of 6; the served draft has 5 and the "
               r"target 6")
    with pytest.raises(ValueError, match=message):
        fit(vocabulary, None, 5, 6)
    with pytest.raises(ValueError, match=r"the served draft has 4 and the target 7"):
        fit(vocabulary, None, 4, 7)
    with pytest.raises(ValueError, match=r"affinity matrix is 6 x 6, but the served target's vocabulary has 7 tokens"):
        fit(None, affinity, 4, 7)
    with pytest.raises(ValueError, match=r"vocabulary map is for a drafter of 4"):  # the map is checked first
        fit(vocabulary, affinity, 4, 7)
    fit(None, affinity, 123, 6)


# ----------------------------------------------------------------------------- additional_config

def test_parse_refusals():
    with pytest.raises(ValueError, match=r"additional_config\['multidraft'\] must be a dict of plugin options, got str"):
        Options.parse("sps")
    with pytest.raises(ValueError, match=r"got NoneType"):
        from_additional_config({"multidraft": None})
    with pytest.raises(ValueError, match=re.escape("unknown multidraft.vllm option(s) ['temperature', 'tree']; known: "
                                                   "['verifier', 'verifier_options', 'vocabulary_map', 'affinity']")):
        Options.parse({"verifier": "sps", "tree": 3, "temperature": 1.0})


def test_from_additional_config_is_inert_unless_asked():
    for config in (None, {}, {"other_plugin": {"verifier": "sps"}}, "multidraft", ["multidraft"]):
        assert from_additional_config(config) is None
    assert from_additional_config({"multidraft": {}}) == Options(verifier_options={})


@pytest.mark.parametrize("entry", [
    {},
    {"verifier": "vllm"},
    {"verifier": "khisti"},
    {"verifier": "global_resolution", "verifier_options": {"tau": 1e-4, "exact": True}},
])
def test_entry_round_trip(entry):
    options = Options.parse(entry)
    again = from_additional_config({"multidraft": options.entry(), "other": 1})
    assert again == options
    assert again.entry() == options.entry() == {"verifier": "sps", **entry}


def test_entry_round_trip_with_files(files):
    options = Options.parse({"verifier": "rrs", "vocabulary_map": files["vocabulary_map"],
                             "affinity": files["affinity"]})
    again = from_additional_config({"multidraft": options.entry()})
    assert again == options
    assert options.entry() == {"verifier": "rrs", "vocabulary_map": files["vocabulary_map"],
                               "affinity": files["affinity"]}


def test_options_and_parse_agree(tested_vllm, files):
    config = multidraft.vllm.options("global_resolution", verifier_options={"tau": 1e-3},
                                     vocabulary_map=files["vocabulary_map"])
    assert from_additional_config(config).entry() == config["multidraft"]
