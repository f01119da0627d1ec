use crate::{Lots, OrderId, Ticks};

/// Why the book refused a message. A refused message changes nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LobError {
    /// No resting order has this id (it never rested, or it already left the
    /// book by trading or cancelling).
    #[error("unknown order id {0}")]
    UnknownOrder(OrderId),
    /// A new or seeded order reused the id of an order that still rests.
    #[error("order id {0} is already resting in the book")]
    DuplicateOrder(OrderId),
    /// An order, reduce, modify or execution of zero lots.
    #[error("quantity must be positive")]
    ZeroQuantity,
    /// A reduce or an external execution asked for more lots than the order
    /// holds.
    #[error("cannot reduce order {id} by {by} lots: only {resting} rest")]
    ReduceTooLarge {
        /// The resting order.
        id: OrderId,
        /// The lots asked for.
        by: Lots,
        /// The lots it holds.
        resting: Lots,
    },
    /// A limit, IOC, modify or seed price of zero or less ticks.
    #[error("price {price} is not positive")]
    BadPrice {
        /// The price given, in ticks.
        price: Ticks,
    },
    /// A raw price that is not a whole number of ticks (see
    /// [`crate::to_ticks`]), or a tick size that is not positive.
    #[error("price {raw} is not on the tick grid of {tick}")]
    OffTick {
        /// The price in raw units (LOBSTER's: 1/10000 dollar).
        raw: i64,
        /// The tick size in the same raw units.
        tick: i64,
    },
}
