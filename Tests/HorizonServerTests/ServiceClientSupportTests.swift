import Foundation
import HorizonServiceClients
import Synchronization
import Testing

/// The shared pieces of the service clients, without a server.
@Suite("Service client cache")
struct CacheTests {
    struct Answer: Codable, Equatable {
        let name: String
        let points: Int
    }

    @Test func aPersistentCacheIsReadBackByAnotherInstance() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cache-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let stored = Date(timeIntervalSince1970: 1_750_000_000)
        let first = try Cache.persistentCache(directory: directory)
        first.store(
            Answer(name: "Bakery", points: 20), for: Cache.key(client: "bonus", scope: "k1", item: "all"), at: stored)
        let second = try Cache.persistentCache(directory: directory)
        let read = try #require(second.value(Answer.self, for: Cache.key(client: "bonus", scope: "k1", item: "all")))
        #expect(read.value == Answer(name: "Bakery", points: 20) && read.storedAt == stored)
        // Another identity's key finds nothing; files are the owner's only.
        #expect(second.value(Answer.self, for: Cache.key(client: "bonus", scope: "k2", item: "all")) == nil)
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        #expect(files.count == 1)
        let mode =
            try FileManager.default.attributesOfItem(atPath: directory.appendingPathComponent(files[0]).path)[
                .posixPermissions] as? NSNumber
        #expect(mode?.intValue == 0o600)
    }

    @Test func resetClearsOneClientOrEverything() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cache-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        for cache in [try Cache.persistentCache(directory: directory), Cache.temporaryAnonymousCache()] {
            let bonus = Cache.key(client: "bonus", scope: "k1", item: "all")
            let coupons = Cache.key(client: "coupons", scope: "k1", item: "all")
            cache.store(Answer(name: "a", points: 1), for: bonus)
            cache.store(Answer(name: "b", points: 2), for: coupons)
            cache.reset(client: "bonus")
            #expect(cache.value(Answer.self, for: bonus) == nil)
            #expect(cache.value(Answer.self, for: coupons)?.value == Answer(name: "b", points: 2))
            cache.reset()
            #expect(cache.value(Answer.self, for: coupons) == nil)
        }
        // The reset reached the disk: a new instance finds nothing either.
        #expect(try Cache.persistentCache(directory: directory).value(Answer.self, for: "coupons/k1/all") == nil)
    }

    @Test func aDamagedOrForeignEntryIsAbsentNotAnAnswer() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cache-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let cache = try Cache.persistentCache(directory: directory)
        cache.store(["not", "an", "answer"], for: "bonus/k1/all")
        #expect(cache.value(Answer.self, for: "bonus/k1/all") == nil)
        let file = try #require(try FileManager.default.contentsOfDirectory(atPath: directory.path).first)
        try Data("{broken".utf8).write(to: directory.appendingPathComponent(file))
        #expect(try Cache.persistentCache(directory: directory).value([String].self, for: "bonus/k1/all") == nil)
    }

    @Test func anUnusableDirectoryIsSaidSo() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("cache-file-\(UUID().uuidString)")
        try Data().write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        #expect(throws: CacheError.self) { try Cache.persistentCache(directory: file) }
    }
}

@Suite("Network reachability")
struct NetworkReachabilityTests {
    @Test func requestOutcomesSetTheStatusAndAReturnSaysTheNetworkMightWorkAgain() async throws {
        let reachability = NetworkReachability(slowThreshold: .seconds(2), probe: { nil })
        let statuses = reachability.statusUpdates()
        let again = reachability.networkMightWorkAgain()
        #expect(reachability.reachabilityStatus == .unknown)
        reachability.recordSuccess(latency: .milliseconds(50))
        reachability.recordSuccess(latency: .milliseconds(60))  // no change, no element
        reachability.recordFailure()
        reachability.recordSuccess(latency: .seconds(3))
        reachability.recordSuccess(latency: .milliseconds(10))
        var iterator = statuses.makeAsyncIterator()
        var seen: [NetworkReachabilityStatus] = []
        for _ in 0..<5 { if let status = await iterator.next() { seen.append(status) } }
        #expect(seen == [.unknown, .fast, .unreachable, .slow, .fast])
        // Once: from unreachable to slow; slow to fast is no return.
        var events = again.makeAsyncIterator()
        #expect(await events.next() != nil)
        reachability.recordFailure()
        reachability.recordSuccess(latency: .milliseconds(5))
        #expect(await events.next() != nil)
        #expect(reachability.reachabilityStatus == .fast)
    }

    @Test func thePeriodicProbeRunsAtItsIntervalUntilStopped() async throws {
        // The probe answers from a script; the sleep waits for the test to let it go on.
        let script = Mutex<[Duration?]>([nil, .milliseconds(20), .seconds(5)])
        let probes = Mutex(0)
        let (ticks, tick) = AsyncStream.makeStream(of: Void.self)
        let (sleeps, slept) = AsyncStream.makeStream(of: Duration.self)
        let reachability = NetworkReachability(
            interval: .seconds(30), slowThreshold: .seconds(1),
            probe: {
                probes.withLock { $0 += 1 }
                return script.withLock { $0.isEmpty ? nil : $0.removeFirst() }
            },
            sleep: { interval in
                slept.yield(interval)
                var iterator = ticks.makeAsyncIterator()
                guard await iterator.next() != nil else { throw CancellationError() }
            })
        let statuses = reachability.statusUpdates()
        var sleepIterator = sleeps.makeAsyncIterator()
        reachability.start()
        #expect(await sleepIterator.next() == .seconds(30))
        #expect(reachability.reachabilityStatus == .unreachable)
        tick.yield()
        #expect(await sleepIterator.next() == .seconds(30))
        #expect(reachability.reachabilityStatus == .fast)
        tick.yield()
        #expect(await sleepIterator.next() == .seconds(30))
        #expect(reachability.reachabilityStatus == .slow)
        reachability.stop()
        tick.finish()
        #expect(probes.withLock { $0 } == 3)
        var statusIterator = statuses.makeAsyncIterator()
        var seen: [NetworkReachabilityStatus] = []
        for _ in 0..<4 { if let status = await statusIterator.next() { seen.append(status) } }
        #expect(seen == [.unknown, .unreachable, .fast, .slow])
    }

    @Test func theHealthProbeReportsAnUnreachableServer() async throws {
        let reachability = NetworkReachability.probingHealth(
            of: try #require(URL(string: "http://127.0.0.1:9")), timeout: .seconds(2))
        await reachability.probeNow()
        #expect(reachability.reachabilityStatus == .unreachable)
    }
}
