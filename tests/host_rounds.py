"""Strategy rounds on host arrays, for the tests that compare a round with its expectation or with
the device's (the strategies themselves decide through the contract's state, either path)."""

from wgsl_splat.contract.state import HostArrays
from wgsl_splat.reference.state import HostState
from wgsl_splat.strategy.adc import ADCRound, DensifyReport, adc_round


def densify_host(arrays: HostArrays, rnd: ADCRound) -> tuple[HostArrays, DensifyReport]:
    """One ADC round on host arrays (a copy): the NumPy reference of a round."""
    state = HostState(arrays)
    report = adc_round(state, rnd)
    return state.arrays, report
