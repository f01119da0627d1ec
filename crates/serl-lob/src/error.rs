use crate::{Lots, OrderId, Ticks};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LobError {
    #[error("unknown order id {0}")]
    UnknownOrder(OrderId),
    #[error("order id {0} is already resting in the book")]
    DuplicateOrder(OrderId),
    #[error("quantity must be positive")]
    ZeroQuantity,
    #[error("cannot reduce order {id} by {by} lots: only {resting} rest")]
    ReduceTooLarge {
        id: OrderId,
        by: Lots,
        resting: Lots,
    },
    #[error("price {price} is not positive")]
    BadPrice { price: Ticks },
    #[error("price {raw} is not on the tick grid of {tick}")]
    OffTick { raw: i64, tick: i64 },
}
