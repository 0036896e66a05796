import Synchronization

/// A value behind a mutex, shareable by reference (closures can capture it).
public final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    public init(_ value: Value) { mutex = Mutex(value) }
    public func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R { try mutex.withLock { try body(&$0) } }
    public var value: Value { mutex.withLock { $0 } }
}
