"""What a dataset.nc plan's removals cost, counted for the tests of large groups: the
entries copied into new plans and the names gone looked at."""

from __future__ import annotations

from zarrfs.views import netcdf_plan as plan_module


def count_plan_work(monkeypatch, work: dict[str, int]) -> None:
    """From now on, add to work["copied"] the variables and arrays left out each plan made
    holds, and to work["looked"] each look at the names gone."""
    planned_init, gone = plan_module._Planned.__init__, plan_module.NetcdfPlan.gone

    def counted_init(self, variables, left_out, cdf5):
        work["copied"] += len(variables) + len(left_out)
        planned_init(self, variables, left_out, cdf5)

    def counted_gone(self, name):
        work["looked"] += 1
        return gone(self, name)

    monkeypatch.setattr(plan_module._Planned, "__init__", counted_init)
    monkeypatch.setattr(plan_module.NetcdfPlan, "gone", counted_gone)
