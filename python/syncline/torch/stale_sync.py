"""SSP for syncline.torch: the schedule of syncline._stale_sync over torch parameters.

Every step sends its model change to the servers and takes the model back, at
most SYNCLINE_SSP_STALENESS steps behind the slowest worker; see
syncline._stale_sync for the rules and what they guarantee.
"""
from syncline import _stale_sync
from syncline.torch.model_sync import TorchParameters, declare_parameters


class StaleSync(_stale_sync.StaleSync):
    """The ssp synchronizations of `named_parameters` (the parameters one wrapper updates)."""

    def __init__(self, named_parameters, compression, prefix):
        params = declare_parameters(named_parameters, compression, prefix)  # (name, parameter)
        super().__init__(TorchParameters(params, compression, vote_name=None, start_prefix="ssp.start."))
