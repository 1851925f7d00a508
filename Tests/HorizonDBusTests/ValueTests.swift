import HorizonDBus
import HorizonTestSupport
import Testing

/// DBusValue without a bus: signatures, accessors, builders, validation; DBusError.
@Suite("D-Bus values")
struct ValueTests {
    @Test func everyValueKnowsItsSignature() {
        let cases: [(DBusValue, String)] = [
            (.byte(1), "y"), (.boolean(true), "b"), (.int16(1), "n"), (.uint16(1), "q"), (.int32(1), "i"),
            (.uint32(1), "u"), (.int64(1), "x"), (.uint64(1), "t"), (.double(1), "d"), (.string(""), "s"),
            (.objectPath("/"), "o"), (.signature(""), "g"), (.unixFileDescriptor(DBusFileDescriptor(owning: -1)), "h"),
            (.byteArray([]), "ay"), (.stringArray([]), "as"), (.objectPathArray([]), "ao"),
            (.stringVariantDictionary([:]), "a{sv}"), (.uint16VariantDictionary([:]), "a{qv}"),
            (.interfacesAndProperties([:]), "a{sa{sv}}"), (.managedObjects([:]), "a{oa{sa{sv}}}"),
            (.structure([.string("a"), .array(elementSignature: "(ii)", [])]), "(sa(ii))"),
            (.variant(.int32(1)), "v"),
        ]
        for (value, signature) in cases { #expect(value.signature == signature) }
    }

    @Test func accessorsReturnOnlyTheirOwnType() {
        #expect(DBusValue.string("a").string == "a")
        #expect(DBusValue.string("a").objectPath == nil)
        #expect(DBusValue.objectPath("/a").objectPath == "/a")
        #expect(DBusValue.uint16(7).uint16 == 7)
        #expect(DBusValue.uint16(7).uint32 == nil)
        #expect(DBusValue.byteArray([1, 2]).bytes == [1, 2])
        #expect(DBusValue.stringArray(["a"]).bytes == nil)
        #expect(DBusValue.variant(.variant(.int32(3))).unwrapped == .int32(3))
        #expect(
            DBusValue.stringVariantDictionary(["k": .boolean(true)]).stringVariantDictionary == ["k": .boolean(true)])
        #expect(
            DBusValue.uint16VariantDictionary([76: .byteArray([1])]).uint16VariantDictionary == [76: .byteArray([1])])
        let objects: [String: [String: [String: DBusValue]]] = ["/a": ["org.x.I": ["P": .string("v")]]]
        #expect(DBusValue.managedObjects(objects).managedObjects == objects)
        #expect(DBusValue.int32(1).dictionary == nil)
        #expect(DBusValue.structure([.int32(1)]).structure == [.int32(1)])
    }

    @Test func buildersSortKeysSoMessagesAreReproducible() {
        let value = DBusValue.stringVariantDictionary(["b": .int32(2), "a": .int32(1)])
        #expect(value.dictionary?.map(\.key) == [.string("a"), .string("b")])
        #expect(value.dictionary?.map(\.value) == [.variant(.int32(1)), .variant(.int32(2))])
    }

    @Test func equalityComparesSignaturesOfEmptyContainers() {
        #expect(DBusValue.byteArray([]) != DBusValue.stringArray([]))
        #expect(DBusValue.stringVariantDictionary([:]) != DBusValue.uint16VariantDictionary([:]))
        #expect(DBusValue.byteArray([1]) == DBusValue.array(elementSignature: "y", [.byte(1)]))
    }

    @Test func validationRefusesWhatLibdbusWouldAbortOn() {
        let invalid: [DBusValue] = [
            .array(elementSignature: "s", [.int32(1)]),
            .array(elementSignature: "", []),
            .array(elementSignature: "ss", []),
            .dictionary(keySignature: "as", valueSignature: "s", []),
            .dictionary(keySignature: "s", valueSignature: "", []),
            .structure([]),
            .objectPath(""),
            .objectPath("/a//b"),
            .signature("(i"),
            .string("a\0b"),
            .unixFileDescriptor(DBusFileDescriptor(owning: -1)),
        ]
        for value in invalid {
            #expect(throws: DBusError.self, "\(value)") { try value.validate() }
        }
        var deep = DBusValue.int32(0)
        for _ in 0..<33 { deep = .array(elementSignature: deep.signature, [deep]) }
        #expect(throws: DBusError.self) { try deep.validate() }
        #expect(throws: Never.self) {
            try DBusValue.managedObjects(["/a": ["org.x.I": ["P": .byteArray([1])]]]).validate()
        }
    }

    @Test func fileDescriptorsAreOwnedUntilTaken() throws {
        let descriptor = try DBusFileDescriptor.duplicating(0)
        let raw = try #require(descriptor.rawValue)
        #expect(raw != 0)
        #expect(descriptor.take() == raw)
        #expect(descriptor.take() == nil)
        #expect(descriptor.rawValue == nil)
        DBusFileDescriptor(owning: raw).close()
        #expect(throws: DBusError.self) { try DBusFileDescriptor.duplicating(-1) }
    }

    @Test func errorsDescribeThemselves() {
        let error = DBusError(name: "org.bluez.Error.InProgress", message: "Operation already in progress")
        #expect(error.description == "Operation already in progress (org.bluez.Error.InProgress)")
        #expect(DBusError(name: "org.x.E").description == "org.x.E")
        #expect(DBusError.timedOut(after: .milliseconds(300)).isTimeout)
        #expect(DBusError.disconnected().isDisconnected)
        #expect(DBusError(name: DBusError.Name.accessDenied, message: "").isConnectionFailure)
        #expect(!DBusError.cancelled.isTimeout)
    }
}
