"""VocabularyMap and AffinityMatrix saved to .npz files and loaded back (e.g. in another process).

A loaded object must equal the saved one exactly (same arrays, same results) and be checked as
the constructor checks it; any other file is refused with ValueError.
"""
import pathlib
import zipfile

import numpy as np
import pytest

import multidraft as md

rdk = md.rdk
VocabularyMap, AffinityMatrix = rdk.VocabularyMap, rdk.AffinityMatrix


def maps():
    rng = np.random.default_rng(17)
    counts = rng.integers(0, 50, size=12)
    return [VocabularyMap(np.array([0, 2, -1, 5]), 6),
            VocabularyMap.pruned([3, 1, 7], 9),
            VocabularyMap.frequency_ranked(counts, 5),
            VocabularyMap.intersection(["a", "b", "c", "z"], ["c", "x", "a", "b", "y"]),
            VocabularyMap(np.array([4]), 5)]


def matrices():
    rng = np.random.default_rng(23)
    dense = rng.random((7, 7)) * (rng.random((7, 7)) < 0.4)
    samples = rng.normal(size=(40, 6))
    return [AffinityMatrix.identity(5),
            AffinityMatrix.from_dense(dense, renormalise=True),
            AffinityMatrix.from_calibration(samples, tau=0.5, top_k=3),
            AffinityMatrix.from_dense(np.array([[1.0]]))]


@pytest.mark.parametrize("index", range(len(maps())))
def test_vocabulary_map_round_trip(tmp_path, index):
    vocabulary = maps()[index]
    path = tmp_path / "map.npz"
    vocabulary.save(path)
    loaded = VocabularyMap.load(path)
    assert loaded.draft_to_target.dtype == np.int64
    np.testing.assert_array_equal(loaded.draft_to_target, vocabulary.draft_to_target)
    assert (loaded.draft_size, loaded.target_size) == (vocabulary.draft_size, vocabulary.target_size)
    np.testing.assert_array_equal(loaded.shared, vocabulary.shared)
    assert repr(loaded) == repr(vocabulary)
    # the same TLI proposals, bit for bit
    q = np.random.default_rng(index).dirichlet(np.ones(vocabulary.draft_size), size=3)
    q[:, vocabulary.draft_to_target < 0] = 0
    q[:, vocabulary.draft_to_target >= 0] += 0.1
    q /= q.sum(axis=1, keepdims=True)
    np.testing.assert_array_equal(np.asarray(loaded.tli(q)), np.asarray(vocabulary.tli(q)))
    # str paths and an already loaded file give the same
    again = VocabularyMap.load(str(path))
    np.testing.assert_array_equal(again.draft_to_target, vocabulary.draft_to_target)


@pytest.mark.parametrize("index", range(len(matrices())))
def test_affinity_matrix_round_trip(tmp_path, index):
    affinity = matrices()[index]
    path = tmp_path / "affinity.npz"
    affinity.save(str(path))
    loaded = AffinityMatrix.load(path)
    assert loaded.V == affinity.V and loaded.nnz == affinity.nnz
    for name in ("indptr", "indices", "values"):
        np.testing.assert_array_equal(getattr(loaded, name), getattr(affinity, name))
        assert getattr(loaded, name).dtype == getattr(affinity, name).dtype
    np.testing.assert_array_equal(loaded.to_dense(), affinity.to_dense())  # values exactly, no rescaling
    assert repr(loaded) == repr(affinity)


def test_save_without_npz_suffix_writes_npz(tmp_path):
    """np.savez appends .npz to a path without it: load reads that file."""
    VocabularyMap(np.array([1, 0]), 2).save(tmp_path / "map")
    AffinityMatrix.identity(3).save(str(tmp_path / "affinity"))
    assert VocabularyMap.load(tmp_path / "map.npz").target_size == 2
    assert AffinityMatrix.load(tmp_path / "affinity.npz").V == 3


def test_a_file_of_the_other_kind_is_refused(tmp_path):
    VocabularyMap(np.array([0, 2, -1]), 4).save(tmp_path / "map.npz")
    AffinityMatrix.identity(4).save(tmp_path / "affinity.npz")
    with pytest.raises(ValueError, match=r"map\.npz is not a saved AffinityMatrix: it holds "
                                         r"\['draft_to_target', 'multidraft_kind', 'target_size'\]"):
        AffinityMatrix.load(tmp_path / "map.npz")
    with pytest.raises(ValueError, match=r"affinity\.npz is not a saved VocabularyMap: it holds "
                                         r"\['indices', 'indptr', 'multidraft_kind', 'values'\]"):
        VocabularyMap.load(tmp_path / "affinity.npz")


def test_other_npz_archives_are_refused(tmp_path):
    np.savez(tmp_path / "plain.npz", draft_to_target=np.array([0, 1]), target_size=np.array(2))  # no kind tag
    np.savez(tmp_path / "partial.npz", multidraft_kind=np.array("VocabularyMap"), draft_to_target=np.array([0, 1]))
    np.savez(tmp_path / "lowercase.npz", multidraft_kind=np.array("vocabularymap"), draft_to_target=np.array([0]),
             target_size=np.array(1))
    for name in ("plain", "partial", "lowercase"):
        with pytest.raises(ValueError, match=rf"{name}\.npz is not a saved VocabularyMap: it holds \["):
            VocabularyMap.load(tmp_path / f"{name}.npz")
    with zipfile.ZipFile(tmp_path / "zip.npz", "w") as archive:
        archive.writestr("notes.txt", "hello")
    with pytest.raises(ValueError, match=r"zip\.npz is not a saved AffinityMatrix: it holds \['notes\.txt'\]"):
        AffinityMatrix.load(tmp_path / "zip.npz")


def test_object_arrays_are_refused_without_unpickling(tmp_path):
    np.savez(tmp_path / "objects.npz", multidraft_kind=np.array("VocabularyMap"),
             draft_to_target=np.array([0, None], dtype=object), target_size=np.array(3))
    with pytest.raises(ValueError, match=r"objects\.npz is not a saved VocabularyMap: not a NumPy \.npz archive"):
        VocabularyMap.load(tmp_path / "objects.npz")


def test_files_that_are_not_npz_are_refused(tmp_path):
    (tmp_path / "notes.txt").write_text("a vocabulary\n")
    for kind, cls in (("VocabularyMap", VocabularyMap), ("AffinityMatrix", AffinityMatrix)):
        for path in (tmp_path / "notes.txt", tmp_path / "absent.npz", tmp_path):
            with pytest.raises(ValueError, match=rf"is not a saved {kind}: not a NumPy \.npz archive of arrays"):
                cls.load(path)


@pytest.mark.parametrize("cls", [VocabularyMap, AffinityMatrix])
@pytest.mark.parametrize("content", ["npy", "empty"])
def test_npy_and_empty_files_are_refused(tmp_path, cls, content):
    path = tmp_path / f"{content}.npz"
    if content == "npy":
        with open(path, "wb") as handle:
            np.save(handle, np.arange(3))
    else:
        path.write_bytes(b"")
    with pytest.raises(ValueError, match=rf"is not a saved {cls.__name__}: not a NumPy \.npz archive"):
        cls.load(path)


def test_loaded_contents_are_checked_as_the_constructor_checks_them(tmp_path):
    np.savez(tmp_path / "map.npz", multidraft_kind=np.array("VocabularyMap"), draft_to_target=np.array([0, 7]),
             target_size=np.array(3))
    with pytest.raises(ValueError, match=r"'draft_to_target' has id 7 at index 1 out of range \[-1, 3\)"):
        VocabularyMap.load(tmp_path / "map.npz")
    np.savez(tmp_path / "twice.npz", multidraft_kind=np.array("VocabularyMap"), draft_to_target=np.array([1, 1]),
             target_size=np.array(3))
    with pytest.raises(ValueError, match="not injective"):
        VocabularyMap.load(tmp_path / "twice.npz")
    np.savez(tmp_path / "affinity.npz", multidraft_kind=np.array("AffinityMatrix"), indptr=np.array([0, 1, 2]),
             indices=np.array([0, 1]), values=np.array([0.5, 1.0]))
    with pytest.raises(ValueError, match=r"M is not row-stochastic: row 0 sums to 0\.5"):
        AffinityMatrix.load(tmp_path / "affinity.npz")
    np.savez(tmp_path / "negative.npz", multidraft_kind=np.array("AffinityMatrix"), indptr=np.array([0, 2, 3]),
             indices=np.array([0, 1, 1]), values=np.array([1.5, -0.5, 1.0]))
    with pytest.raises(ValueError, match=r"M has an invalid entry \S*-0\.5\S* at \(row 0, column 1\)"):
        AffinityMatrix.load(tmp_path / "negative.npz")


def test_saved_files_are_plain_arrays(tmp_path):
    """What save writes: the kind tag and the arrays, readable without pickling."""
    VocabularyMap(np.array([2, -1, 0]), 3).save(tmp_path / "map.npz")
    with np.load(tmp_path / "map.npz", allow_pickle=False) as data:
        assert sorted(data.files) == ["draft_to_target", "multidraft_kind", "target_size"]
        assert str(data["multidraft_kind"]) == "VocabularyMap"
        np.testing.assert_array_equal(data["draft_to_target"], [2, -1, 0])
        assert int(data["target_size"]) == 3
    assert pathlib.Path(tmp_path / "map.npz").stat().st_size > 0
