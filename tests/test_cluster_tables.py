"""The cluster's planning tables, kept between decisions (policies/cluster_tables.py)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from helpers import cluster, job, scenario, snapshot
from hypothesis import given, settings
from hypothesis import strategies as st
from test_policies import snapshots

from andreas.model import Profiles
from andreas.policies.base import Assignment
from andreas.policies.search import cluster_tables
from andreas.policies.search.cluster_tables import tables_for
from andreas.policies.search.placement import Placement
from andreas.policies.search.planning import PlanningContext


def small():
    return scenario(cluster([("n1", "A", 2), ("n2", "B", 4)], {"A": [100, 180],
                                                              "B": [50, 90, 130, 170]}),
                    {"p": {("A", 1): 10.0, ("A", 2): 6.0, ("B", 4): 3.0, ("B", 8): 1.0}},
                    [job("a", profile="p"), job("b", profile="p")])


def test_one_cluster_gets_one_set_of_tables_and_an_equal_copy_its_own():
    sc = small()
    first = tables_for(sc.cluster)
    assert tables_for(sc.cluster) is first
    copy = dataclasses.replace(sc.cluster)
    assert copy == sc.cluster and tables_for(copy) is not first
    # ("B", 8) does not fit the largest B node: not a candidate of profile p
    rows, _ = first.profile_rows(sc.profiles).lookup(["p"])
    assert first.profile_rows(sc.profiles).hostable[rows[0]] == [
        ("A", 0, 1, 10.0), ("A", 0, 2, 6.0), ("B", 1, 4, 3.0)]


def test_only_the_most_recent_clusters_keep_their_tables():
    clusters = [dataclasses.replace(small().cluster) for _ in range(cluster_tables.KEEP + 2)]
    tables = [tables_for(c) for c in clusters]
    assert tables_for(clusters[-1]) is tables[-1]
    assert tables_for(clusters[0]) is not tables[0]  # dropped, built again


def test_shared_arrays_cannot_be_written():
    tables = tables_for(small().cluster)
    with pytest.raises(ValueError):
        tables.k_node_cap[0] = 99
    _, (p_type, *_) = tables.profile_rows(small().profiles).lookup(["p"])
    with pytest.raises(ValueError):
        p_type[0, 0] = 1


def test_a_plan_reuses_one_assignment_per_place():
    sc = small()
    ctx = PlanningContext(snapshot(sc))
    placed = Placement.waiting(2).moved_to(ctx, {0: (0, 0), 1: (0, 0)})
    plan = placed.to_plan(ctx)
    gpus = placed.gpus(ctx).tolist()
    assert plan == {"a": Assignment("n1", gpus[0]), "b": Assignment("n1", gpus[1])}
    assert placed.to_plan(PlanningContext(snapshot(sc)))["a"] is plan["a"]


@settings(max_examples=60, deadline=None)
@given(snapshots(), st.permutations(["p0", "p1", "wide"]))
def test_tables_that_met_other_profiles_first_give_the_same_candidates(snap, met):
    """Rows kept from earlier decisions (other profiles, in another order, one with more
    configurations: wider arrays) give every job the candidates fresh tables give it."""
    wide = {(t, g): 5.0 for t in "AB" for g in (1, 2, 3, 4)}
    profiles = Profiles({**snap.profiles.table, "wide": wide})
    snap = dataclasses.replace(snap, profiles=profiles)
    fresh = PlanningContext(snap)
    used = dataclasses.replace(snap, cluster=dataclasses.replace(snap.cluster))
    tables_for(used.cluster).profile_rows(profiles).lookup(list(met))
    kept = PlanningContext(used)
    assert kept.table.ct.shape[1] >= fresh.table.ct.shape[1]
    assert np.array_equal(kept.table.nc, fresh.table.nc)
    for j in range(len(snap.jobs)):  # each row's real entries, in its order
        n = fresh.table.nc[j]
        for name in ("ct", "cg", "ctime", "cen", "meets"):
            assert np.array_equal(getattr(kept.table, name)[j, :n],
                                  getattr(fresh.table, name)[j, :n])
    assert kept.tmin == fresh.tmin and kept.wait_penalty == fresh.wait_penalty
